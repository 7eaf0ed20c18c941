//! How much work a request asks for, before computing it: what the page weighs against
//! the fixed cost of a trip to the GPU (a request smaller than a round trip is faster on
//! the CPU). The counts are the ones the entries' own checks hold against
//! [`super::MAX_WORK`], taken from the same plans.

use serde_json::Value;

use super::{
    Entry, bandit_gradient, clip_surrogate, group_advantages, importance_sampling, kl_estimators,
    lag_filter, mixed_group, parse_request, policy_loss,
};

/// About how much work a request of entry `name` asks for, in units of
/// [`super::MAX_WORK`] (about a second of CPU): the draws of a Monte Carlo entry as its
/// plan counts them, the numbers of an element-wise one. What a caller weighs against
/// the fixed cost of a trip to the device. `None` for an entry without a kernel, or a
/// request that does not validate (computing it gives the error).
pub fn estimated_work(name: &str, request: &Value) -> Option<u64> {
    fn parsed<E: Entry>(request: &Value) -> Option<E::Request> {
        parse_request::<E::Request>(request.clone()).ok()
    }
    let units = super::units;
    if name == bandit_gradient::BanditGradient::NAME {
        let request = parsed::<bandit_gradient::BanditGradient>(request)?;
        return bandit_gradient::plan(&request).ok().map(|p| p.work());
    }
    if name == importance_sampling::ImportanceSampling::NAME {
        let request = parsed::<importance_sampling::ImportanceSampling>(request)?;
        return importance_sampling::plan(&request).ok().map(|p| p.work());
    }
    if name == kl_estimators::KlEstimators::NAME {
        let request = parsed::<kl_estimators::KlEstimators>(request)?;
        return kl_estimators::plan(&request).ok().map(|p| p.work());
    }
    if name == mixed_group::MixedGroup::NAME {
        let request = parsed::<mixed_group::MixedGroup>(request)?;
        return mixed_group::plan(&request).ok().map(|p| p.work());
    }
    if name == lag_filter::LagFilter::NAME {
        let request = parsed::<lag_filter::LagFilter>(request)?;
        return lag_filter::plan(&request).ok().map(|p| p.work());
    }
    if name == clip_surrogate::ClipSurrogate::NAME {
        let request = parsed::<clip_surrogate::ClipSurrogate>(request)?;
        let advantages = request.advantage.to_vec().len();
        return Some(super::work(&[
            units(request.ratio.len()),
            units(advantages),
        ]));
    }
    if name == group_advantages::GroupAdvantagesEntry::NAME {
        let request = parsed::<group_advantages::GroupAdvantagesEntry>(request)?;
        return Some(units(request.rewards.total_len()));
    }
    if name == policy_loss::PolicyLossEntry::NAME {
        let request = parsed::<policy_loss::PolicyLossEntry>(request)?;
        return Some(units(request.logp.total_len()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_entry_with_a_kernel_has_a_size_and_no_other_does() {
        for entry in super::super::ENTRIES {
            let example = super::super::examples::example(entry.name).expect("an example");
            let work = estimated_work(entry.name, &example);
            assert_eq!(
                work.is_some(),
                super::super::GPU_ENTRIES.contains(&entry.name),
                "{}: {work:?}",
                entry.name
            );
        }
    }

    #[test]
    fn sizes_count_draws_and_elements_and_grow_with_the_request() {
        let bandit = |samples: u64, estimates: u64| {
            json!({
                "p": 0.5, "q": [0.75, 0.35], "baseline": "leave-one-out",
                "group_size": 4, "samples": samples, "estimates": estimates, "seed": 7
            })
        };
        assert_eq!(
            estimated_work("bandit-gradient", &bandit(24, 100)),
            Some(2 * 24 * 100)
        );
        assert_eq!(
            estimated_work("bandit-gradient", &bandit(240, 1000)),
            Some(2 * 240 * 1000)
        );
        let clip = json!({"ratio": [0.5, 1.0, 1.5], "advantage": [1.0, -1.0], "eps_low": 0.2});
        assert_eq!(estimated_work("clip-surrogate", &clip), Some(6));
        // A request that does not validate has no size: computing it reports the error.
        assert_eq!(estimated_work("bandit-gradient", &json!({"q": "x"})), None);
        assert_eq!(
            estimated_work("pass-at-k", &json!({"n": 20, "c": 5, "k": 4})),
            None
        );
    }
}
