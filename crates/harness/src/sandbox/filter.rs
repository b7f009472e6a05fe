//! The seccomp filter every sandboxed worker runs under (its list is in [`super`]'s
//! documentation): the calls refused answer EPERM.

use super::SandboxError;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// System calls a kernel under test has no use for and an attacker does: reading or writing
/// another process's memory, changing the boundary, loading code into the kernel.
fn refused() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_pidfd_getfd,
        libc::SYS_kcmp,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_mount_setattr,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_open_by_handle_at,
    ];
    calls.sort_unstable();
    calls
}

/// The namespace flags of `clone`: a new namespace of any kind is a way around the
/// boundary (a user namespace gives back every capability inside it), as `unshare` is.
const NEW_NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
];

/// `clone` with any namespace flag: one rule per flag (a rule's conditions must all hold,
/// and any rule refuses the call). The flags are clone's first argument on x86_64 and
/// aarch64 alike.
fn clone_rules() -> Result<Vec<SeccompRule>, SandboxError> {
    NEW_NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            let flag = flag as u64;
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .and_then(|condition| SeccompRule::new(vec![condition]))
            .map_err(|e| SandboxError(format!("seccomp rule: {e}")))
        })
        .collect()
}

fn install(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    arch: TargetArch,
) -> Result<(), SandboxError> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| SandboxError(format!("seccomp filter: {e}")))?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e| SandboxError(format!("seccomp filter: {e:?}")))?;
    seccompiler::apply_filter(&program).map_err(|e| SandboxError(format!("seccomp: {e}")))
}

pub fn apply() -> Result<(), SandboxError> {
    let arch = if cfg!(target_arch = "x86_64") {
        TargetArch::x86_64
    } else if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else {
        return Err("no seccomp filter for this architecture".into());
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = refused()
        .into_iter()
        .map(|call| (call, Vec::new()))
        .collect();
    rules.insert(libc::SYS_clone, clone_rules()?);
    install(rules, libc::EPERM, arch)?;
    // clone3 takes its flags in memory, where a filter cannot look: it is refused as if
    // the kernel had none (ENOSYS), on which the C library falls back to clone, checked
    // above. A second filter: the kernel applies the strictest answer of all filters.
    install(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        libc::ENOSYS,
        arch,
    )
}
