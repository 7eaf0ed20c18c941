//! Work split over threads, said once: how many threads to use, and scoped threads
//! whose results come back in order and whose panics reach the caller.
//!
//! On `wasm32` (the notebook in a browser) there are no threads: every helper here
//! runs its work on the calling thread, so the same code compiles and gives the same
//! results everywhere. Callers split work so that the result does not depend on the
//! thread count (each part draws from its own random stream, or sums in a fixed order).
//!
//! The calling thread's cancellation token ([`crate::cancel`]) is current on every
//! thread started here too, so cancelled work stops on all of them.

use std::num::NonZero;

use crate::cancel;

/// The threads this machine offers (1 on `wasm32`).
pub fn available_threads() -> usize {
    if cfg!(target_arch = "wasm32") {
        1
    } else {
        std::thread::available_parallelism().map_or(1, NonZero::get)
    }
}

/// Threads for `work` units of work: 1 below `min_work` (where starting threads costs
/// more than it saves), else every available thread.
pub fn threads_for(work: usize, min_work: usize) -> usize {
    if work < min_work {
        1
    } else {
        available_threads()
    }
}

/// Runs every job, each on its own scoped thread (one job runs on the calling thread),
/// and returns their results in the order of `jobs`. A job's panic is resumed here.
pub fn run_all<F, R>(jobs: Vec<F>) -> Vec<R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    if jobs.len() <= 1 || available_threads() == 1 {
        return jobs.into_iter().map(|job| job()).collect();
    }
    let token = cancel::current();
    std::thread::scope(|scope| {
        let mut jobs = jobs.into_iter();
        let first = jobs.next();
        let handles: Vec<_> = jobs
            .map(|job| {
                let token = token.clone();
                scope.spawn(move || cancel::with(token.as_ref(), job))
            })
            .collect();
        let mut results: Vec<R> = first.into_iter().map(|job| job()).collect();
        results.extend(handles.into_iter().map(|handle| {
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }));
        results
    })
}

/// Runs `a` on the calling thread and `b` on a second one (both here on `wasm32`).
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    if available_threads() == 1 {
        return (a(), b());
    }
    let token = cancel::current();
    std::thread::scope(|scope| {
        let second = scope.spawn(move || cancel::with(token.as_ref(), b));
        let first = a();
        let second = second
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (first, second)
    })
}

/// `work` over `items` split into at most `threads` contiguous parts, each on its own
/// thread, with the results concatenated in the order of `items`.
pub fn in_parts<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    work: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let never = try_in_parts(items, threads, |part| {
        Ok::<_, std::convert::Infallible>(work(part))
    });
    match never {
        Ok(results) => results,
        Err(infallible) => match infallible {},
    }
}

/// [`in_parts`] for work that can fail: the results in the order of `items`, or the
/// error of the first part (in that order) that failed.
pub fn try_in_parts<T: Sync, R: Send, E: Send>(
    items: &[T],
    threads: usize,
    work: impl Fn(&[T]) -> Result<Vec<R>, E> + Sync,
) -> Result<Vec<R>, E> {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return work(items);
    }
    let work = &work;
    let jobs: Vec<_> = items
        .chunks(items.len().div_ceil(threads))
        .map(|part| move || work(part))
        .collect();
    let mut all = Vec::with_capacity(items.len());
    for part in run_all(jobs) {
        all.extend(part?);
    }
    Ok(all)
}

/// `work` on every item of `items` on at most `threads` threads, each of which takes
/// the next item nobody has taken yet, in the order of `items`, until none is left;
/// the results come back in the order of `items`. A thread makes its own `state`
/// once (e.g. a model replica) and hands it to `work` for every item it takes.
///
/// Where items cost different amounts, a queue balances what contiguous parts
/// ([`try_in_parts`]) cannot: listing the costliest items first, a thread that
/// finishes early takes the next one (longest-processing-time-first scheduling).
/// Which thread runs an item never changes its result.
///
/// After an item fails, no thread takes another; the error returned is that of the
/// first failing item in the order of `items` (every item before it was taken, since
/// items are taken in order, so the choice does not depend on the timing).
pub fn try_pulled<T: Sync, S, R: Send, E: Send>(
    items: &[T],
    threads: usize,
    state: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, &T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        let mut own = state();
        return items.iter().map(|item| work(&mut own, item)).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let worker = || {
        let mut own = None;
        let mut done: Vec<(usize, Result<R, E>)> = Vec::new();
        while !failed.load(Ordering::Acquire) {
            let index = next.fetch_add(1, Ordering::AcqRel);
            let Some(item) = items.get(index) else { break };
            let result = work(own.get_or_insert_with(&state), item);
            if result.is_err() {
                failed.store(true, Ordering::Release);
            }
            done.push((index, result));
        }
        done
    };
    let jobs: Vec<_> = (0..threads).map(|_| &worker).collect();
    let mut all: Vec<(usize, Result<R, E>)> = run_all(jobs).into_iter().flatten().collect();
    all.sort_by_key(|(index, _)| *index);
    // Items are taken in order, so the results hold every index up to the last one
    // taken; with no failure, that is every item.
    all.into_iter().map(|(_, result)| result).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_order_whatever_the_split() {
        let items: Vec<u32> = (0..37).collect();
        let expected: Vec<u32> = items.iter().map(|x| x * x).collect();
        for threads in [1, 2, 3, 8, 100] {
            let squares = in_parts(&items, threads, |part| part.iter().map(|x| x * x).collect());
            assert_eq!(squares, expected, "{threads} threads");
        }
        assert!(in_parts(&[] as &[u32], 4, <[u32]>::to_vec).is_empty());
    }

    #[test]
    fn try_in_parts_returns_everything_or_the_first_error() {
        let items: Vec<u32> = (0..10).collect();
        let doubled = try_in_parts(&items, 3, |part| {
            Ok::<_, String>(part.iter().map(|x| 2 * x).collect())
        });
        assert_eq!(doubled.unwrap(), (0..10).map(|x| 2 * x).collect::<Vec<_>>());
        let failed = try_in_parts(&items, 3, |part| {
            if part.contains(&5) || part.contains(&9) {
                Err(format!("part from {}", part[0]))
            } else {
                Ok(part.to_vec())
            }
        });
        assert_eq!(failed.unwrap_err(), "part from 4");
    }

    #[test]
    fn run_all_and_join_return_every_result() {
        let jobs: Vec<_> = (0..5).map(|i| move || i * 10).collect();
        assert_eq!(run_all(jobs), [0, 10, 20, 30, 40]);
        assert_eq!(join(|| 1, || "two"), (1, "two"));
    }

    #[test]
    fn the_cancellation_token_reaches_every_thread() {
        let token = cancel::CancelToken::new();
        token.cancel();
        let seen = cancel::with(Some(&token), || {
            let jobs: Vec<_> = (0..4).map(|_| cancel::requested).collect();
            let (a, b) = join(cancel::requested, cancel::requested);
            let mut seen = run_all(jobs);
            seen.extend([a, b]);
            seen
        });
        assert_eq!(seen, [true; 6]);
        assert!(!cancel::requested());
    }

    #[test]
    #[should_panic(expected = "a worker failed")]
    fn a_worker_panic_reaches_the_caller() {
        let jobs: Vec<Box<dyn FnOnce() + Send>> =
            vec![Box::new(|| ()), Box::new(|| panic!("a worker failed"))];
        run_all(jobs);
    }

    #[test]
    fn small_work_stays_on_one_thread() {
        assert_eq!(threads_for(10, 100), 1);
        assert!(threads_for(1000, 100) >= 1);
    }

    #[test]
    fn pulled_results_come_back_in_order_with_one_state_per_thread() {
        let items: Vec<u64> = (0..23).collect();
        for threads in [1, 2, 3, 8, 100] {
            let states = std::sync::atomic::AtomicUsize::new(0);
            let squares = try_pulled(
                &items,
                threads,
                || states.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                |_, x| Ok::<_, String>(x * x),
            )
            .unwrap();
            assert_eq!(squares, items.iter().map(|x| x * x).collect::<Vec<_>>());
            let made = states.into_inner();
            assert!(
                made >= 1 && made <= threads.min(items.len()),
                "{made} states"
            );
        }
        let none = try_pulled(&[] as &[u64], 4, || (), |(), x| Ok::<_, String>(*x)).unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn pulled_returns_the_first_error_in_item_order() {
        let items: Vec<u32> = (0..40).collect();
        for threads in [1, 2, 4] {
            let failed = try_pulled(
                &items,
                threads,
                || (),
                |(), &x| {
                    if x == 7 || x == 30 {
                        Err(format!("item {x}"))
                    } else {
                        Ok(x)
                    }
                },
            );
            assert_eq!(failed.unwrap_err(), "item 7", "{threads} threads");
        }
    }

    #[test]
    fn pulled_work_shares_the_items_between_threads() {
        if available_threads() < 2 {
            return;
        }
        // The first item blocks until another thread has taken an item: with contiguous
        // parts both would sit in the same part's queue; with pulling, another thread
        // takes the second item while the first still runs.
        let taken = std::sync::atomic::AtomicUsize::new(0);
        let ids = try_pulled(
            &[0u32, 1],
            2,
            || std::thread::current().id(),
            |id, &x| {
                taken.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                if x == 0 {
                    let start = std::time::Instant::now();
                    while taken.load(std::sync::atomic::Ordering::Acquire) < 2 {
                        assert!(
                            start.elapsed().as_secs() < 30,
                            "the second item was never taken"
                        );
                        std::thread::yield_now();
                    }
                }
                Ok::<_, String>(*id)
            },
        )
        .unwrap();
        assert_ne!(ids[0], ids[1]);
    }
}
