//! One guest's Job Object: every process the guest starts is in it (children inherit the
//! job), its limits (kill on close, idle priority, the job's memory, a process cap), its
//! process ids and accounting (CPU, bytes written), and termination of the whole tree at once.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectBasicAccountingInformation, JobObjectBasicAndIoAccountingInformation,
    JobObjectBasicProcessIdList, JobObjectExtendedLimitInformation, QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
    JOBOBJECTINFOCLASS, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT, JOB_OBJECT_LIMIT_ACTIVE_PROCESS, JOB_OBJECT_LIMIT_JOB_MEMORY,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, JOB_OBJECT_LIMIT_PRIORITY_CLASS,
};
use windows_sys::Win32::System::Threading::IDLE_PRIORITY_CLASS;

/// The query of a job's I/O accounting, as `lull status` names it when refused.
pub const IO_ACCOUNTING_CALL: &str = "QueryInformationJobObject(JobObjectBasicAndIoAccountingInformation)";

/// The most process ids read from a job at once.
const MAX_IDS: usize = 1024;

/// A Job Object; closing its last handle kills every process in it (once the kill-on-close
/// limit is set).
#[derive(Debug)]
pub struct Job {
    handle: OwnedHandle,
}

/// The limits a guest's job asks for.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The job's committed memory, bytes.
    pub memory_bytes: u64,
    /// The most processes alive in the job at once (Linux: `pids.max`).
    pub processes: u32,
}

/// CPU and process counts of a job.
#[derive(Clone, Debug)]
pub struct Accounting {
    pub cpu_user_us: u64,
    pub cpu_system_us: u64,
    /// Processes in the job now.
    pub active: u32,
    /// Bytes the job's processes wrote with write calls (files, pipes, devices), or the
    /// I/O accounting's query and its error where it is refused (Wine 8.0).
    pub written: Result<u64, String>,
}

impl Job {
    /// A new, unnamed job with no limits yet.
    pub fn create() -> io::Result<Self> {
        // SAFETY: no attributes, no name; the handle is checked and then owned.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh handle this process owns alone.
        Ok(Self { handle: unsafe { OwnedHandle::from_raw_handle(raw) } })
    }

    fn raw(&self) -> windows_sys::Win32::Foundation::HANDLE {
        self.handle.as_raw_handle()
    }

    /// Sets kill-on-close, then each further limit on its own on top of those already set,
    /// so one the system refuses does not take the others with it. Returns the calls
    /// refused, each with its error; an error when even kill-on-close is refused.
    pub fn set_limits(&self, limits: Limits) -> io::Result<Vec<String>> {
        let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        self.write_limits(&info)?;
        let mut refused = Vec::new();
        let each: [(JOB_OBJECT_LIMIT, &str); 3] = [
            (JOB_OBJECT_LIMIT_PRIORITY_CLASS, "JOB_OBJECT_LIMIT_PRIORITY_CLASS (idle)"),
            (JOB_OBJECT_LIMIT_JOB_MEMORY, "JOB_OBJECT_LIMIT_JOB_MEMORY"),
            (JOB_OBJECT_LIMIT_ACTIVE_PROCESS, "JOB_OBJECT_LIMIT_ACTIVE_PROCESS"),
        ];
        for (flag, name) in each {
            let mut next = info;
            next.BasicLimitInformation.LimitFlags |= flag;
            next.BasicLimitInformation.PriorityClass = IDLE_PRIORITY_CLASS;
            next.JobMemoryLimit = usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX);
            next.BasicLimitInformation.ActiveProcessLimit = limits.processes.max(1);
            match self.write_limits(&next) {
                Ok(()) => info = next,
                Err(e) => refused.push(format!("SetInformationJobObject({name}): {e}")),
            }
        }
        Ok(refused)
    }

    fn write_limits(&self, info: &JOBOBJECT_EXTENDED_LIMIT_INFORMATION) -> io::Result<()> {
        let size = std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32;
        // SAFETY: `info` is a whole JOBOBJECT_EXTENDED_LIMIT_INFORMATION of `size` bytes.
        let ok = unsafe { SetInformationJobObject(self.raw(), JobObjectExtendedLimitInformation, std::ptr::from_ref(info).cast(), size) };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Puts a (suspended) process into the job; its children follow it there.
    pub fn assign(&self, process: &OwnedHandle) -> io::Result<()> {
        // SAFETY: both handles are open for the call.
        if unsafe { AssignProcessToJobObject(self.raw(), process.as_raw_handle()) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The ids of the processes in the job now.
    pub fn process_ids(&self) -> io::Result<Vec<u32>> {
        // The list's header (two u32) then the ids (usize each), in a usize buffer.
        let mut buf = vec![0usize; 1 + MAX_IDS];
        let size = (buf.len() * std::mem::size_of::<usize>()) as u32;
        // SAFETY: `buf` is `size` bytes, aligned for JOBOBJECT_BASIC_PROCESS_ID_LIST.
        let ok = unsafe {
            QueryInformationJobObject(self.raw(), JobObjectBasicProcessIdList, buf.as_mut_ptr().cast(), size, std::ptr::null_mut())
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        // The second u32 of the header: how many ids were written.
        let listed = (buf[0] >> 32) as usize;
        Ok(buf[1..=listed.min(MAX_IDS)].iter().map(|&id| id as u32).collect())
    }

    /// One fixed-size information class of the job (`T` is its structure).
    fn query<T: Default>(&self, class: JOBOBJECTINFOCLASS) -> io::Result<T> {
        let mut info = T::default();
        let size = std::mem::size_of::<T>() as u32;
        // SAFETY: `info` is a whole `T` of `size` bytes, the structure `class` fills.
        let ok = unsafe { QueryInformationJobObject(self.raw(), class, std::ptr::from_mut(&mut info).cast(), size, std::ptr::null_mut()) };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info)
    }

    /// CPU time (user, kernel) of every process the job has held, how many it holds now,
    /// and the bytes they wrote (the I/O accounting; the basic one alone where refused).
    pub fn accounting(&self) -> io::Result<Accounting> {
        // 100 ns units.
        let us = |t: i64| u64::try_from(t).unwrap_or(0) / 10;
        let (info, written) = match self.query::<JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION>(JobObjectBasicAndIoAccountingInformation) {
            Ok(both) => (both.BasicInfo, Ok(both.IoInfo.WriteTransferCount)),
            Err(e) => (
                self.query::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>(JobObjectBasicAccountingInformation)?,
                Err(format!("{IO_ACCOUNTING_CALL}: {e}")),
            ),
        };
        Ok(Accounting {
            cpu_user_us: us(info.TotalUserTime),
            cpu_system_us: us(info.TotalKernelTime),
            active: info.ActiveProcesses,
            written,
        })
    }

    /// The most memory the job's processes have committed together, bytes (0 if unknown).
    pub fn peak_memory(&self) -> u64 {
        self.query::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>(JobObjectExtendedLimitInformation)
            .map_or(0, |info| info.PeakJobMemoryUsed as u64)
    }

    /// Ends every process in the job at once, with `exit_code`.
    pub fn terminate(&self, exit_code: u32) -> io::Result<()> {
        // SAFETY: the job handle is open.
        if unsafe { TerminateJobObject(self.raw(), exit_code) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
