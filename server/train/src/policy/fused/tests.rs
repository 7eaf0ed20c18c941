//! Every fused piece against burn's own graph on the same numbers: the value, and the
//! gradient of a random linear functional `L = sum w y` of the output (so `dL/dy = w`),
//! with respect to every input. The whole network is checked the same way through
//! [`super::score`], the interface the trainer uses.

use arlbook_core::rng::RandomStream;
use burn::prelude::*;
use burn::tensor::activation::{gelu, softmax};

use super::attention::{self, Shape};
use super::score::{Entropy, Path, score};
use super::weights::Weights;
use super::{gelu as fused_gelu, head, norm};
use crate::config::{ModelConfig, PositionKind};
use crate::learner::batching::micro_batch;
use crate::learner::loss::{entropy_with_graph, token_logprobs};
use crate::learner::replicas::tests::collect;
use crate::policy::model::PolicyModel;
use crate::policy::rollout::Rollout;
use crate::run::trainer::vocab;

fn autodiff() -> Device {
    Device::flex().autodiff()
}

/// `len` numbers uniform in `[-scale, scale)` from stream `stream`.
fn numbers(len: usize, stream: u64, scale: f32) -> Vec<f32> {
    let mut rng = RandomStream::new(41, stream);
    (0..len)
        .map(|_| (2.0 * rng.uniform_f32() - 1.0) * scale)
        .collect()
}

fn leaf<const D: usize>(values: &[f32], shape: [usize; D]) -> Tensor<D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), &autodiff()).require_grad()
}

fn values<const D: usize>(tensor: Tensor<D>) -> Vec<f32> {
    tensor.try_into_vec_as::<f32>().expect("read back")
}

fn grad<const D: usize>(tensor: &Tensor<D>, grads: &burn::tensor::Gradients) -> Vec<f32> {
    values(tensor.grad(grads).expect("a gradient"))
}

/// `|a - b| <= tolerance max(1, max |b|)` element by element.
#[track_caller]
fn assert_close(what: &str, fused: &[f32], burn: &[f32], tolerance: f32) {
    assert_eq!(fused.len(), burn.len(), "{what}: lengths");
    let scale = burn.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    for (i, (a, b)) in fused.iter().zip(burn).enumerate() {
        assert!(
            (a - b).abs() <= tolerance * scale,
            "{what}[{i}]: fused {a} vs burn {b} (scale {scale})"
        );
    }
}

#[test]
fn layer_norm_matches_burn_in_value_and_gradient() {
    let (rows, d) = (6, 12);
    let x = numbers(rows * d, 1, 3.0);
    let gamma = numbers(d, 2, 1.5);
    let beta = numbers(d, 3, 0.5);
    let w = numbers(rows * d, 4, 1.0);
    let (xt, gt, bt) = (leaf(&x, [rows, d]), leaf(&gamma, [d]), leaf(&beta, [d]));
    let out = burn::tensor::module::layer_norm(
        xt.clone(),
        gt.clone(),
        Some(bt.clone()),
        f64::from(norm::EPSILON),
    );
    let grads = (out.clone()
        * Tensor::from_data(TensorData::new(w.clone(), [rows, d]), &autodiff()))
    .sum()
    .backward();

    let mut h = vec![0.0; rows * d];
    let saved = norm::forward(&x, d, &gamma, &beta, &mut h);
    assert_close("layer norm", &h, &values(out), 1e-5);
    let (mut dx, mut dgamma, mut dbeta) = (vec![0.0; rows * d], vec![0.0; d], vec![0.0; d]);
    norm::backward(&saved, &gamma, &w, &mut dx, &mut dgamma, &mut dbeta);
    assert_close("d input", &dx, &grad(&xt, &grads), 1e-5);
    assert_close("d gamma", &dgamma, &grad(&gt, &grads), 1e-5);
    assert_close("d beta", &dbeta, &grad(&bt, &grads), 1e-5);
}

#[test]
fn gelu_matches_burn_in_value_and_gradient() {
    let u = numbers(400, 5, 6.0);
    let w = numbers(400, 6, 1.0);
    let ut = leaf(&u, [400]);
    let out = gelu(ut.clone());
    let grads = (out.clone() * Tensor::from_data(TensorData::new(w.clone(), [400]), &autodiff()))
        .sum()
        .backward();
    let mut g = vec![0.0; 400];
    fused_gelu::forward(&u, &mut g);
    assert_close("gelu", &g, &values(out), 1e-6);
    let mut du = vec![0.0; 400];
    fused_gelu::backward(&u, &w, &mut du);
    assert_close("d gelu", &du, &grad(&ut, &grads), 1e-6);
}

/// burn's causal attention on a fused `qkv` as `model::Block` computes it (split,
/// heads, scaled scores, `-1e9` after the diagonal, softmax, values, heads merged).
fn burn_attention(qkv: &Tensor<3>, heads: usize) -> Tensor<3> {
    let [n, s, three_d] = qkv.dims();
    let d = three_d / 3;
    let dh = d / heads;
    let split = |i: usize| {
        qkv.clone()
            .slice(s![.., .., i * d..(i + 1) * d])
            .reshape([n, s, heads, dh])
            .swap_dims(1, 2)
    };
    let (q, k, v) = (split(0), split(1), split(2));
    let scores = q.matmul(k.swap_dims(2, 3)).div_scalar((dh as f64).sqrt());
    let causal = Tensor::<2, Bool>::tril_mask([s, s], 0, &qkv.device()).reshape([1, 1, s, s]);
    let scores = scores.mask_fill(causal.expand([n, heads, s, s]), -1.0e9);
    softmax(scores, 3)
        .matmul(v)
        .swap_dims(1, 2)
        .reshape([n, s, d])
}

#[test]
fn causal_attention_matches_burn_in_value_and_gradient() {
    // 70 positions: two query blocks, the second shorter than the first.
    let shape = Shape {
        rows: 2,
        seq: 70,
        heads: 3,
        head_dim: 4,
    };
    let d = shape.heads * shape.head_dim;
    let positions = shape.rows * shape.seq;
    let qkv = numbers(positions * 3 * d, 7, 1.5);
    let w = numbers(positions * d, 8, 1.0);
    let qt = leaf(&qkv, [shape.rows, shape.seq, 3 * d]);
    let out = burn_attention(&qt, shape.heads);
    let grads = (out.clone()
        * Tensor::from_data(
            TensorData::new(w.clone(), [shape.rows, shape.seq, d]),
            &autodiff(),
        ))
    .sum()
    .backward();

    let mut probs = vec![0.0; shape.probs_len()];
    let mut context = vec![0.0; positions * d];
    attention::forward(shape, &qkv, &mut probs, &mut context);
    assert_close("attention", &context, &values(out), 1e-5);
    let mut d_qkv = vec![f32::NAN; qkv.len()];
    attention::backward(shape, &qkv, &probs, &w, &mut d_qkv);
    assert_close("d qkv", &d_qkv, &grad(&qt, &grads), 1e-5);
}

#[test]
fn log_probabilities_and_entropy_match_burn_with_and_without_a_nucleus() {
    let (positions, v) = (5, 9);
    let z = numbers(positions * v, 9, 4.0);
    let targets: Vec<usize> = vec![0, 3, 8, 5, 2];
    let (a, b) = (numbers(positions, 10, 1.0), numbers(positions, 11, 1.0));
    // The nucleus keeps each target and a few others.
    let kept: Vec<bool> = (0..positions * v)
        .map(|i| targets[i / v] == i % v || i % 3 == 0)
        .collect();
    for temperature in [1.0f32, 0.7] {
        for nucleus in [false, true] {
            let zt = leaf(&z, [1, positions, v]);
            let target_tensor = Tensor::<2, Int>::from_data(
                TensorData::new(
                    targets.iter().map(|&t| t as i32).collect::<Vec<_>>(),
                    [1, positions],
                ),
                &autodiff(),
            );
            let not_kept = nucleus.then(|| {
                Tensor::<3, Bool>::from_data(
                    TensorData::new(
                        kept.iter().map(|k| !k).collect::<Vec<_>>(),
                        [1, positions, v],
                    ),
                    &autodiff(),
                )
            });
            let logp = token_logprobs(zt.clone(), target_tensor, f64::from(temperature), not_kept);
            let entropy = entropy_with_graph(zt.clone(), f64::from(temperature));
            let weights = |w: &[f32]| {
                Tensor::<2>::from_data(TensorData::new(w.to_vec(), [1, positions]), &autodiff())
            };
            let grads = (logp.clone() * weights(&a) + entropy.clone() * weights(&b))
                .sum()
                .backward();
            let burn_dz = grad(&zt, &grads);
            let (burn_logp, burn_entropy) = (values(logp), values(entropy));
            for p in 0..positions {
                let row = &z[p * v..(p + 1) * v];
                let keep = nucleus.then(|| &kept[p * v..(p + 1) * v]);
                let (logp, saved) = head::forward(row, targets[p], temperature, keep);
                let what = format!("T {temperature}, nucleus {nucleus}, position {p}");
                assert_close(&format!("logp, {what}"), &[logp], &[burn_logp[p]], 1e-6);
                assert_close(
                    &format!("entropy, {what}"),
                    &[saved.entropy],
                    &[burn_entropy[p]],
                    1e-6,
                );
                let mut dz = vec![0.0; v];
                head::backward(&saved, temperature, a[p], b[p], &mut dz);
                assert_close(
                    &format!("dz, {what}"),
                    &dz,
                    &burn_dz[p * v..(p + 1) * v],
                    1e-6,
                );
            }
        }
    }
}

/// Three rows of different lengths: a teacher's episode on the article's task, the same
/// with random tokens in place of its own, and that cut after its first action.
fn rollouts() -> Vec<Rollout> {
    use arlbook_core::agent::{
        EpisodeIds, HarnessConfig, SpanRole, Teacher, article_example, run_episode,
    };
    let task = article_example();
    let ids = EpisodeIds {
        group_id: 0,
        sample_id: 0,
    };
    let whole = run_episode(
        &task,
        &mut Teacher::new(&task),
        &HarnessConfig::default(),
        ids,
        1,
    );
    let v = vocab() as u32;
    let mut rng = RandomStream::new(3, 12);
    let mut shuffled = whole.clone();
    for token in &mut shuffled.tokens {
        *token = 6 + rng.below(v - 6);
    }
    let mut cut = shuffled.clone();
    let first_action_end = cut
        .spans
        .iter()
        .find(|s| s.role == SpanRole::Action)
        .map_or(cut.tokens.len(), |s| s.end);
    cut.tokens.truncate(first_action_end);
    cut.spans.retain(|s| s.start < first_action_end);
    [whole, shuffled, cut]
        .into_iter()
        .map(|record| Rollout {
            record,
            keep: Vec::new(),
            entropy: Vec::new(),
        })
        .collect()
}

#[test]
fn the_fused_network_scores_and_differentiates_as_burn_s_graph() {
    network_matches_burn(PositionKind::Learned);
}

#[test]
fn the_fused_network_with_rotary_positions_scores_and_differentiates_as_burn_s_graph() {
    network_matches_burn(PositionKind::Rotary);
}

fn network_matches_burn(positions: PositionKind) {
    let device = autodiff();
    device.seed(5);
    let config = ModelConfig {
        layers: 2,
        width: 16,
        heads: 2,
        context: 640,
        positions,
    };
    let model = PolicyModel::new(&config, vocab(), &device);
    let weights = Weights::of(&model).expect("weights");
    let rows = rollouts();
    let refs: Vec<&Rollout> = rows.iter().collect();
    let micro = micro_batch(&refs, vocab(), &device);
    let [n, t] = micro.mask.dims();
    let (a, b) = (numbers(n * t, 13, 1.0), numbers(n * t, 14, 0.3));
    let weight = |w: &[f32]| {
        Tensor::<2>::from_data(TensorData::new(w.to_vec(), [n, t]), &device) * micro.mask.clone()
    };
    for temperature in [1.0, 0.8] {
        let mut results = Vec::new();
        for path in [Path::Graph, Path::Fused(&weights)] {
            let scored = score(
                path,
                &model,
                &micro.tokens,
                temperature,
                Entropy::Graph,
                &device,
            )
            .expect("scored");
            let loss =
                (scored.logp.clone() * weight(&a) + scored.entropy.clone() * weight(&b)).sum();
            let masked = |x: Tensor<2>| values(x.detach() * micro.mask.clone());
            let (logp, entropy) = (masked(scored.logp.clone()), masked(scored.entropy.clone()));
            let grads = scored
                .gradients(&loss, &model, &Device::flex())
                .expect("gradients");
            results.push((logp, entropy, collect(&model, &grads)));
        }
        let (burn, fused) = (&results[0], &results[1]);
        assert_close("logp", &fused.0, &burn.0, 2e-5);
        assert_close("entropy", &fused.1, &burn.1, 2e-5);
        assert_eq!(fused.2.len(), burn.2.len());
        assert!(burn.2.iter().flatten().any(|&g| g != 0.0));
        for (i, (f, b)) in fused.2.iter().zip(&burn.2).enumerate() {
            assert_close(
                &format!("T {temperature}: gradient of parameter {i}"),
                f,
                b,
                1e-4,
            );
        }
    }
}

/// The logits of burn's generation passes and of [`super::infer::advance`] on the same
/// rows: a prefill of contexts of different lengths, an extension by suffixes of
/// different lengths, decode steps with a stopped row, and a selection of rows.
#[test]
fn generation_passes_match_burn_s_prefill_extension_and_decode_steps() {
    generation_matches_burn(PositionKind::Learned);
}

#[test]
fn generation_passes_with_rotary_positions_match_burn_s() {
    generation_matches_burn(PositionKind::Rotary);
}

fn generation_matches_burn(positions: PositionKind) {
    use super::infer::{Cache, advance};
    let device = Device::flex();
    device.seed(9);
    let config = ModelConfig {
        layers: 2,
        width: 16,
        heads: 2,
        context: 128,
        positions,
    };
    let model = PolicyModel::new(&config, vocab(), &device);
    let weights = Weights::of(&model).expect("weights");
    let v = vocab() as u32;
    let mut rng = RandomStream::new(8, 1);
    let mut tokens = |n: usize| -> Vec<u32> { (0..n).map(|_| 6 + rng.below(v - 6)).collect() };
    let contexts = [tokens(5), tokens(70), tokens(1)];
    let refs: Vec<&[u32]> = contexts.iter().map(Vec::as_slice).collect();
    let burn_logits = |t: Tensor<2>| values(t);

    let (mut burn_cache, logits) = model.prefill(&refs, &device);
    let mut cache = Cache::new(3, config.layers);
    assert_close(
        "prefill",
        &advance(&weights, &mut cache, &refs),
        &burn_logits(logits),
        1e-5,
    );

    let suffixes = [tokens(3), tokens(1), tokens(66)];
    let refs: Vec<&[u32]> = suffixes.iter().map(Vec::as_slice).collect();
    let logits = model.extend(&mut burn_cache, &refs, &device);
    assert_close(
        "extension",
        &advance(&weights, &mut cache, &refs),
        &burn_logits(logits),
        1e-5,
    );
    assert_eq!(
        (cache.len_of(0), cache.len_of(1), cache.len_of(2)),
        (8, 71, 67)
    );

    let vocab = vocab();
    for step in 0..3 {
        let next = tokens(3);
        let live = [true, step != 1, true];
        let logits = burn_logits(model.decode_step(&mut burn_cache, &next, &live, &device));
        let fed: Vec<&[u32]> = next
            .iter()
            .zip(live)
            .map(|(t, l)| if l { std::slice::from_ref(t) } else { &[] })
            .collect();
        let fused = advance(&weights, &mut cache, &fed);
        for row in (0..3).filter(|&r| live[r]) {
            let span = row * vocab..(row + 1) * vocab;
            assert_close(
                &format!("decode step {step}, row {row}"),
                &fused[span.clone()],
                &logits[span],
                1e-5,
            );
        }
    }

    let rows = [2, 0];
    let mut burn_cache = burn_cache.select(&rows, &device);
    let mut cache = cache.select(&rows);
    let next = tokens(2);
    let logits = burn_logits(model.decode_step(&mut burn_cache, &next, &[true, true], &device));
    let fed: Vec<&[u32]> = next.iter().map(std::slice::from_ref).collect();
    assert_close(
        "after a selection",
        &advance(&weights, &mut cache, &fed),
        &logits,
        1e-5,
    );
}
