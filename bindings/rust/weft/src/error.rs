//! `weft::Error`: a status code plus the library's message (`weft_last_error`).
use std::ffi::CStr;
use std::fmt;

use weft_sys as sys;

/// Why an operation failed: the `weft_status_t` error codes of weft.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// A bad argument: NULL, out of range, bad enum, overlap, wrong length.
    InvalidArgument,
    /// A valid request this build or transport cannot do.
    Unsupported,
    /// `WEFT_ERR_OUT_OF_MEMORY`: an allocation failed.
    OutOfMemory,
    /// A deadline (`Config::timeout` / `WEFT_TIMEOUT`) expired.
    Timeout,
    /// A peer failed or disappeared; the message names its rank.
    Remote,
    /// [`Comm::abort`](crate::Comm::abort) was called on this communicator.
    Aborted,
    /// Ranks disagree (version, or op/count/dtype/root in check mode).
    Mismatch,
    /// The network/transport layer failed.
    Transport,
    /// A bug in weft.
    Internal,
    /// A code this binding does not know (a newer library).
    Unknown(i32),
}

impl Status {
    /// Maps a C status; `None` for `WEFT_OK` and `WEFT_IN_PROGRESS` (not errors).
    pub fn from_code(code: sys::weft_status_t) -> Option<Status> {
        Some(match code {
            sys::WEFT_OK | sys::WEFT_IN_PROGRESS => return None,
            sys::WEFT_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::WEFT_ERR_UNSUPPORTED => Status::Unsupported,
            sys::WEFT_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::WEFT_ERR_TIMEOUT => Status::Timeout,
            sys::WEFT_ERR_REMOTE => Status::Remote,
            sys::WEFT_ERR_ABORTED => Status::Aborted,
            sys::WEFT_ERR_MISMATCH => Status::Mismatch,
            sys::WEFT_ERR_TRANSPORT => Status::Transport,
            sys::WEFT_ERR_INTERNAL => Status::Internal,
            other => Status::Unknown(other),
        })
    }

    /// The C code of this status.
    pub fn code(self) -> sys::weft_status_t {
        match self {
            Status::InvalidArgument => sys::WEFT_ERR_INVALID_ARGUMENT,
            Status::Unsupported => sys::WEFT_ERR_UNSUPPORTED,
            Status::OutOfMemory => sys::WEFT_ERR_OUT_OF_MEMORY,
            Status::Timeout => sys::WEFT_ERR_TIMEOUT,
            Status::Remote => sys::WEFT_ERR_REMOTE,
            Status::Aborted => sys::WEFT_ERR_ABORTED,
            Status::Mismatch => sys::WEFT_ERR_MISMATCH,
            Status::Transport => sys::WEFT_ERR_TRANSPORT,
            Status::Internal => sys::WEFT_ERR_INTERNAL,
            Status::Unknown(c) => c,
        }
    }

    /// The library's name and short explanation (`weft_status_string`).
    pub fn description(self) -> &'static str {
        status_string(self.code())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// `weft_status_string`: static name and explanation of any status code (never fails).
pub fn status_string(code: sys::weft_status_t) -> &'static str {
    // SAFETY: weft_status_string returns a static, NUL-terminated string, never NULL.
    unsafe { CStr::from_ptr(sys::weft_status_string(code)) }.to_str().unwrap_or("(non-UTF-8 status string)")
}

/// `weft_last_error`: the message of the last failed weft call on this thread ("" if none).
/// Errors returned by this crate already carry it; this is for code mixing in `weft-sys` calls.
pub fn last_error() -> String {
    // SAFETY: weft_last_error returns a thread-local NUL-terminated string, valid until the
    // next weft call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(sys::weft_last_error()) }.to_string_lossy().into_owned()
}

/// An error from weft: the status and the detailed message (which function, which argument,
/// rank or peer, what was expected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    /// An error with the given status and message (used for checks this crate makes before
    /// calling the library).
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(Status::InvalidArgument, message)
    }

    /// Builds the error for a failed C call, reading `weft_last_error` (call right after the
    /// failing function, on the same thread).
    pub(crate) fn from_failed_call(code: sys::weft_status_t) -> Error {
        let status = Status::from_code(code).unwrap_or(Status::Unknown(code));
        Error { status, message: last_error() }
    }

    /// The status code of the failed call.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The library's detailed message (`weft_last_error` at the time of the failure).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{} ({})", self.message, self.status)
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Turns a C status into a `Result`, collecting the message on failure.
pub(crate) fn check(code: sys::weft_status_t) -> Result<()> {
    if code == sys::WEFT_OK {
        Ok(())
    } else {
        Err(Error::from_failed_call(code))
    }
}
