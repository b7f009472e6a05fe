//! The log of tests that skipped at run time (tests/oracle/common.rs): whole lines from tests
//! running at once, and a fresh log per run of each test binary.

use crate::common;

use std::path::Path;

#[test]
fn lines_written_at_once_never_interleave() {
    let dir = common::scratch_dir("skip-log-lines");
    let line = |thread: usize| format!("{}\n", format!("thread {thread} ").repeat(200));
    std::thread::scope(|scope| {
        for thread in 0..8 {
            let dir = &dir;
            scope.spawn(move || {
                for _ in 0..50 {
                    common::append_skip(dir, "lines", 7, &line(thread)).unwrap();
                }
            });
        }
    });
    let text = std::fs::read_to_string(dir.join("lines.7.log")).unwrap();
    assert_eq!(text.lines().count(), 400);
    for written in text.lines() {
        let thread: usize = written.split(' ').nth(1).unwrap().parse().unwrap();
        assert_eq!(
            format!("{written}\n"),
            line(thread),
            "a line was interleaved"
        );
    }
}

#[test]
fn a_finished_runs_log_is_removed_and_a_running_ones_kept() {
    let dir = common::scratch_dir("skip-log-stale");
    let write = |name: &str| std::fs::write(dir.join(name), "x: y: z\n").unwrap();
    // No process has pid 4194305 (above Linux's pid_max); this one's parent is running.
    let running = std::os::unix::process::parent_id();
    write("door.4194305.log");
    write(&format!("door.{running}.log"));
    write("cli.4194305.log");
    common::remove_stale_logs(&dir, "door", std::process::id());
    let exists = |name: &str| Path::new(&dir.join(name)).exists();
    assert!(!exists("door.4194305.log"), "an earlier run's log stays");
    assert!(
        exists(&format!("door.{running}.log")),
        "a running test's log was removed"
    );
    assert!(
        exists("cli.4194305.log"),
        "another binary's log is its own to clear"
    );
}
