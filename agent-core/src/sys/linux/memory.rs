//! Giving memory back to the system: dropping a mapping's pages and trimming the heap.

/// Drops the pages of `range` (`MADV_DONTNEED`); true if the kernel did.
///
/// # Safety
/// `range` must be a whole mapping of this process whose contents the next access may
/// fault in again unchanged (a clean, read-only, file-backed mapping without private
/// pages), holding no Rust object's writable state.
pub unsafe fn drop_pages(range: std::ops::Range<usize>) -> bool {
    // SAFETY: the caller's contract above.
    unsafe { libc::madvise(range.start as *mut libc::c_void, range.end - range.start, libc::MADV_DONTNEED) == 0 }
}

/// Returns the allocator's free memory at the top of the heap to the system.
pub fn trim_heap() {
    // SAFETY: malloc_trim has no preconditions.
    unsafe { libc::malloc_trim(0) };
}
