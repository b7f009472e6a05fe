//! The few system calls the launcher and `/dev` make that `libc` has no safe wrapper for, each
//! an error in words.
use super::SandboxError;
use std::ffi::CString;
use std::io::Error;
use std::path::Path;

/// A C string of `text` (`?` where it holds a NUL, which no path here does).
pub fn c_string(text: &str) -> CString {
    CString::new(text).unwrap_or_else(|_| CString::new("?").expect("no NUL"))
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const AT_RECURSIVE: libc::c_uint = 0x8000;

pub fn check(what: &str, result: libc::c_long) -> Result<(), SandboxError> {
    if result < 0 {
        Err(SandboxError(format!("{what}: {}", Error::last_os_error())))
    } else {
        Ok(())
    }
}

pub fn mount(
    source: &str,
    target: &Path,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> Result<(), SandboxError> {
    let (source, fstype, data) = (c_string(source), c_string(fstype), c_string(data));
    let target_c = c_string(&target.display().to_string());
    // SAFETY: every pointer is a valid NUL-terminated string for the call's duration.
    let result = unsafe {
        libc::mount(
            source.as_ptr(),
            target_c.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    check(
        &format!("mount {} on {}", source.to_string_lossy(), target.display()),
        result.into(),
    )
}

/// `mount_setattr(2)`: sets and clears mount attributes of `path` (with `AT_RECURSIVE`, of
/// every mount below it too).
pub fn set_attr(
    path: &Path,
    set: u64,
    clear: u64,
    flags: libc::c_uint,
) -> Result<(), SandboxError> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let path_c = c_string(&path.display().to_string());
    // SAFETY: a valid path and an attribute struct of the size passed.
    check(&format!("mount_setattr {}", path.display()), unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path_c.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
}
