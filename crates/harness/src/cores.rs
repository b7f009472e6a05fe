//! The CPU cores a campaign may use on its host (its share when several campaigns run on one
//! GPU host at once, one per GPU), and which of its work goes first on them: the case in hand
//! before the inputs made ahead ([`ahead_pool`], [`beside`]).
//!
//! Why: a campaign's CPU work (inputs made ahead, the CPU model's cross-check, judging) runs on
//! rayon's pool, which by default takes every core the process may run on. Four campaigns on a
//! host of four GPUs, each taking all 64 cores, ran each at a third of its speed alone: every
//! pool's threads contended for every core. A campaign given a GPU of several therefore takes
//! its GPUs' share of the cores, and `certify --gpus` pins each shard to its own slice.
//!
//! The rules, in order:
//! 1. `RAYON_NUM_THREADS` set: rayon's own setting, as given.
//! 2. The process may run on fewer cores than the host has online (`taskset`, a scheduler's
//!    cpuset, `certify --gpus`' pinning): someone has budgeted already; all of those.
//! 3. The host has G > 1 GPUs (`/proc/driver/nvidia/gpus`) and the process sees V < G of them
//!    (`CUDA_VISIBLE_DEVICES`): V/G of its cores, at least one.
//! 4. Otherwise every core it may run on.

use std::path::Path;

/// Where the host's GPUs are listed, one folder each, by the NVIDIA driver.
const DRIVER_GPUS: &str = "/proc/driver/nvidia/gpus";

/// The cores a campaign uses and why, in words for the start of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreBudget {
    pub threads: usize,
    /// The cores this process may run on.
    pub allowed: usize,
    pub why: String,
    /// Whether this is a share of the host's cores (rules 1 to 3), worth saying at the start.
    pub shared: bool,
}

/// What the budget is decided from, read from the host ([`CoreFacts::of_this_host`]) or given
/// by a test.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoreFacts {
    pub rayon_threads: Option<String>,
    /// Cores this process may run on (its affinity), and cores online on the host.
    pub allowed: usize,
    pub online: usize,
    /// GPUs on the host, and the `CUDA_VISIBLE_DEVICES` list, if set.
    pub host_gpus: usize,
    pub visible_devices: Option<String>,
}

impl CoreFacts {
    pub fn of_this_host() -> CoreFacts {
        let allowed = std::thread::available_parallelism().map_or(1, |n| n.get());
        // SAFETY: sysconf has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        CoreFacts {
            rayon_threads: std::env::var("RAYON_NUM_THREADS").ok(),
            allowed,
            online: usize::try_from(online).unwrap_or(allowed).max(allowed),
            host_gpus: host_gpus(Path::new(DRIVER_GPUS)),
            visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
        }
    }

    /// The budget these facts give (the rules in the module's documentation).
    pub fn budget(&self) -> CoreBudget {
        let allowed = self.allowed.max(1);
        let all = |why: String, shared: bool| CoreBudget {
            threads: allowed,
            allowed,
            why,
            shared,
        };
        if let Some(threads) = self
            .rayon_threads
            .as_deref()
            .and_then(|t| t.trim().parse::<usize>().ok())
            .filter(|&t| t > 0)
        {
            return CoreBudget {
                threads,
                allowed,
                why: format!("RAYON_NUM_THREADS={threads}"),
                shared: true,
            };
        }
        if allowed < self.online {
            return all(
                format!(
                    "the {allowed} of the host's {} cores this process may run on",
                    self.online
                ),
                true,
            );
        }
        let visible = self
            .visible_devices
            .as_deref()
            .map(|list| list.split(',').filter(|gpu| !gpu.trim().is_empty()).count());
        match visible {
            Some(visible) if self.host_gpus > 1 && visible > 0 && visible < self.host_gpus => {
                let threads = (allowed * visible / self.host_gpus).max(1);
                CoreBudget {
                    threads,
                    allowed,
                    why: format!(
                        "{threads} of {allowed} cores: {visible} of the host's {} GPUs \
                         (CUDA_VISIBLE_DEVICES), the rest left to campaigns on the others",
                        self.host_gpus
                    ),
                    shared: true,
                }
            }
            _ => all(format!("all {allowed} cores"), false),
        }
    }
}

/// GPUs the driver lists on this host (0 where it lists none or there is no driver).
fn host_gpus(listing: &Path) -> usize {
    std::fs::read_dir(listing).map_or(0, |entries| entries.filter_map(Result::ok).count())
}

/// This process's budget, decided once.
pub fn budget() -> &'static CoreBudget {
    static BUDGET: std::sync::OnceLock<CoreBudget> = std::sync::OnceLock::new();
    BUDGET.get_or_init(|| CoreFacts::of_this_host().budget())
}

/// Sizes rayon's global pool to this process's budget (once, before any parallel work; a
/// pool already built is left as it is) and returns the budget.
pub fn use_budget() -> &'static CoreBudget {
    let budget = budget();
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(budget.threads)
        .build_global();
    budget
}

/// How much lower than the campaign's own threads the ahead pool's threads run (a `nice`
/// value: at 10 the scheduler gives such a thread about a tenth of a core another wants).
const AHEAD_NICENESS: libc::c_int = 10;

/// A second pool, as large as the budget, for work done ahead of need (a campaign's next
/// cases' inputs), its threads at a lower priority than the rest of the process.
///
/// Why: rayon's threads take work from their own queues and each other's before a job handed
/// in from outside the pool. Inputs made ahead on the global pool therefore kept a case's
/// kernel run and its reference, handed in from the campaign's thread, waiting until every
/// input being made was done: a third of a traced hopper campaign's range cases (16 of 42 s on
/// an H200) was that wait. On a pool of its own, at a lower priority, the work ahead takes the
/// cores the case in hand leaves idle, and yields them when it needs them.
pub fn ahead_pool() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(budget().threads)
            .thread_name(|i| format!("ahead-{i}"))
            // A priority that cannot be lowered leaves the thread as it is: only the order of
            // work changes, never a result.
            .start_handler(|_| lower_this_threads_priority())
            .build()
            .expect("a thread pool can be built")
    })
}

/// Lowers the calling thread's priority by [`AHEAD_NICENESS`] (Linux sets `nice` per thread).
fn lower_this_threads_priority() {
    // SAFETY: gettid and setpriority have no preconditions; raising one's own niceness needs no
    // privilege.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, AHEAD_NICENESS);
    }
}

/// `run` (a case's kernel run) on the calling thread and `model` (its reference) on a thread of
/// its own, at once.
///
/// Why not `rayon::join`: called from outside rayon's pool, it hands both in to the pool, whose
/// threads take such a job only once they have nothing of their own, so the kernel waited for
/// whatever parallel work was under way. And the model (the GPU reference) holds its engine's
/// lock while it works on rayon's threads: a pool thread waiting on that lock would never be
/// let in.
pub(crate) fn beside<A: Send, B: Send>(
    run: impl FnOnce() -> A + Send,
    model: impl FnOnce() -> B + Send,
) -> (A, B) {
    std::thread::scope(|scope| {
        let model = scope.spawn(model);
        let ran = run();
        let modelled = model
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (ran, modelled)
    })
}

/// `cores` split into `parts` contiguous slices of (nearly) equal size, for pinning one
/// process per GPU; a part gets at least one core (cores are shared when there are fewer
/// cores than parts).
pub fn slices(cores: &[usize], parts: usize) -> Vec<Vec<usize>> {
    let parts = parts.max(1);
    if cores.is_empty() {
        return vec![Vec::new(); parts];
    }
    (0..parts)
        .map(|i| {
            let start = i * cores.len() / parts;
            let end = ((i + 1) * cores.len() / parts).max(start + 1);
            cores[start.min(cores.len() - 1)..end.min(cores.len())].to_vec()
        })
        .collect()
}

/// The cores this process may run on (its affinity mask), in order.
pub fn allowed_cores() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// Restricts the calling process to `cores` (for a child, between fork and exec: the call is
/// a plain system call). An empty list changes nothing.
pub fn pin_to(cores: &[usize]) -> std::io::Result<()> {
    if cores.is_empty() {
        return Ok(());
    }
    // SAFETY: as above; CPU_SET is bounded by CPU_SETSIZE, which allowed_cores never exceeds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cores {
            libc::CPU_SET(cpu, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(allowed: usize, online: usize, host_gpus: usize, visible: Option<&str>) -> CoreFacts {
        CoreFacts {
            rayon_threads: None,
            allowed,
            online,
            host_gpus,
            visible_devices: visible.map(str::to_string),
        }
    }

    #[test]
    fn one_gpu_of_four_takes_a_quarter_of_the_cores() {
        assert_eq!(facts(64, 64, 4, Some("2")).budget().threads, 16);
        assert_eq!(facts(64, 64, 4, Some("0,1")).budget().threads, 32);
        assert!(facts(64, 64, 4, Some("2"))
            .budget()
            .why
            .contains("1 of the host's 4 GPUs"));
    }

    #[test]
    fn a_budget_already_given_or_no_split_keeps_every_allowed_core() {
        // Pinned by taskset or a cpuset: not divided again.
        assert_eq!(facts(16, 64, 4, Some("2")).budget().threads, 16);
        // Every GPU visible, no GPU, one GPU, an empty list: all cores.
        assert_eq!(facts(64, 64, 4, None).budget().threads, 64);
        assert_eq!(facts(64, 64, 4, Some("0,1,2,3")).budget().threads, 64);
        assert_eq!(facts(8, 8, 0, Some("0")).budget().threads, 8);
        assert_eq!(facts(8, 8, 1, Some("0")).budget().threads, 8);
        assert_eq!(facts(8, 8, 4, Some("")).budget().threads, 8);
        // At least one core, however many GPUs.
        assert_eq!(facts(2, 2, 8, Some("5")).budget().threads, 1);
    }

    #[test]
    fn rayons_own_setting_wins() {
        let mut given = facts(64, 64, 4, Some("1"));
        given.rayon_threads = Some("6".into());
        assert_eq!(given.budget().threads, 6);
        given.rayon_threads = Some("zero".into());
        assert_eq!(
            given.budget().threads,
            16,
            "an unreadable value is rayon's to refuse"
        );
    }

    #[test]
    fn the_ahead_pool_runs_below_the_campaigns_priority() {
        let (ours, ahead) = ahead_pool().install(|| {
            // SAFETY: getpriority has no preconditions; 0 means the calling thread here.
            let ahead = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            (std::thread::current().name().map(str::to_string), ahead)
        });
        // SAFETY: as above.
        let here = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        assert!(ours.is_some_and(|name| name.starts_with("ahead-")));
        assert_eq!(ahead, (here + AHEAD_NICENESS).min(19));
    }

    /// With every thread of rayon's pool busy, `beside` starts the run at once (rayon::join,
    /// called from outside the pool, started it only once the pool had nothing else to do).
    #[test]
    fn beside_does_not_wait_for_rayons_pool() {
        use rayon::prelude::*;
        let threads = rayon::current_num_threads();
        let started = std::time::Instant::now();
        let busy = std::thread::spawn(move || {
            (0..threads * 4)
                .into_par_iter()
                .for_each(|_| std::thread::sleep(std::time::Duration::from_millis(400)));
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        let (ran_at, modelled_at) = beside(|| started.elapsed(), || started.elapsed());
        busy.join().unwrap();
        let pool_done = started.elapsed();
        assert!(
            pool_done.as_millis() >= 1500,
            "the pool was busy for {pool_done:?}"
        );
        assert!(
            ran_at.as_millis() < 1000 && modelled_at.as_millis() < 1000,
            "run started at {ran_at:?}, model at {modelled_at:?}, the pool free at {pool_done:?}"
        );
    }

    #[test]
    fn slices_are_contiguous_disjoint_and_cover_the_cores() {
        let cores: Vec<usize> = (0..64).collect();
        let parts = slices(&cores, 4);
        assert_eq!(parts[1], (16..32).collect::<Vec<_>>());
        assert_eq!(parts.concat(), cores);
        let odd = slices(&[0, 2, 4, 6, 8], 2);
        assert_eq!(odd, vec![vec![0, 2], vec![4, 6, 8]]);
        // More parts than cores: each gets one, shared.
        assert_eq!(slices(&[3, 5], 3), vec![vec![3], vec![3], vec![5]]);
    }

    #[test]
    fn the_host_lists_its_gpus_as_folders() {
        let dir = std::env::temp_dir().join(format!("nvfp4-cores-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("0000:18:00.0")).unwrap();
        std::fs::create_dir_all(dir.join("0000:2a:00.0")).unwrap();
        assert_eq!(host_gpus(&dir), 2);
        assert_eq!(host_gpus(&dir.join("missing")), 0);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
