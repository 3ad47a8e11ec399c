//! The policy's allocator: a bump allocator that starts in the linear memory the
//! module declares and grows it only once that is used up.
//!
//! An instance lives for one decision and is discarded, so freeing is wasted work and
//! never freeing is correct; the host's memory cap bounds a runaway policy. What
//! matters is `memory.grow`: the host resets each grown page's protection when the
//! instance is recycled, an `mprotect` that interrupts every core the operator runs on
//! (a TLB shootdown). The allocator this replaced (lol_alloc's `LeakingAllocator`)
//! started at the end of memory and grew it page by page, so every decision grew
//! memory at least once: 2 `mprotect` calls per decision at 5 pods (`perf stat`), and
//! more at 100. This one first uses the free part of the initial memory (from
//! `__heap_base`; policies link `--initial-memory`, see `.cargo/config.toml`), grows by
//! doubling when it must, and extends the last block in place on `realloc` (strings
//! and vectors built by pushing).

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use core::ptr::null_mut;

/// A WebAssembly page.
pub const PAGE: usize = 1 << 16;

/// Linear memory as the allocator sees it.
pub trait Memory {
    /// Where the heap may start: the end of the stack and data.
    fn heap_base(&self) -> usize;
    /// The address just past the end of memory.
    fn end(&self) -> usize;
    /// The current size, in pages.
    fn pages(&self) -> usize;
    /// Grows by `pages`; false when the host refuses.
    fn grow(&self, pages: usize) -> bool;
}

/// Bump allocation over a [`Memory`]. Single-threaded: a wasm32 instance without the
/// threads proposal runs one thread.
pub struct Bump<M> {
    /// The next free byte; 0 until the first allocation.
    next: Cell<usize>,
    /// The end of memory, as last seen.
    end: Cell<usize>,
    memory: M,
}

// SAFETY: see the type's documentation; only one thread ever touches it.
unsafe impl<M> Sync for Bump<M> {}

impl<M: Memory> Bump<M> {
    pub const fn new(memory: M) -> Self {
        Bump { next: Cell::new(0), end: Cell::new(0), memory }
    }

    /// Room for `layout`: its address, or `None` when memory cannot grow enough.
    fn claim(&self, layout: Layout) -> Option<usize> {
        if self.next.get() == 0 {
            self.next.set(self.memory.heap_base());
            self.end.set(self.memory.end());
        }
        let start = self.next.get().checked_next_multiple_of(layout.align())?;
        let stop = start.checked_add(layout.size())?;
        if stop > self.end.get() {
            self.grow_to(stop)?;
        }
        self.next.set(stop);
        Some(start)
    }

    /// Grows memory to hold `stop`: doubling it, or by what is needed when the host
    /// refuses that much.
    fn grow_to(&self, stop: usize) -> Option<()> {
        let needed = (stop - self.end.get()).div_ceil(PAGE);
        let pages = self.memory.pages();
        if !(self.memory.grow(needed.max(pages)) || self.memory.grow(needed)) {
            return None;
        }
        self.end.set(self.memory.end());
        Some(())
    }
}

unsafe impl<M: Memory> GlobalAlloc for Bump<M> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.claim(layout).map_or(null_mut(), |at| at as *mut u8)
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // The last block grows or shrinks where it is.
        let at = ptr as usize;
        if at + layout.size() == self.next.get() {
            match at.checked_add(new_size) {
                Some(stop) if stop <= self.end.get() || self.grow_to(stop).is_some() => {
                    self.next.set(stop);
                    return ptr;
                }
                _ => return null_mut(),
            }
        }
        let Ok(new) = Layout::from_size_align(new_size, layout.align()) else { return null_mut() };
        let moved = unsafe { self.alloc(new) };
        if !moved.is_null() {
            // SAFETY: both blocks are live and distinct; `ptr` holds `layout.size()` bytes.
            unsafe { core::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size)) };
        }
        moved
    }
}

/// The instance's own linear memory.
#[cfg(target_arch = "wasm32")]
pub struct Linear;

#[cfg(target_arch = "wasm32")]
impl Memory for Linear {
    fn heap_base(&self) -> usize {
        unsafe extern "C" {
            // Set by the linker (wasm-ld) after the stack and data.
            static __heap_base: u8;
        }
        &raw const __heap_base as usize
    }

    fn end(&self) -> usize {
        self.pages() * PAGE
    }

    fn pages(&self) -> usize {
        core::arch::wasm32::memory_size(0)
    }

    fn grow(&self, pages: usize) -> bool {
        core::arch::wasm32::memory_grow(0, pages) != usize::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linear memory as a byte buffer reserved up to its cap (so that addresses are
    /// real and stay put), with a count of grows.
    struct Buffer {
        bytes: Vec<u8>,
        pages: Cell<usize>,
        grows: Cell<usize>,
    }

    impl Buffer {
        fn new(pages: usize, cap_pages: usize) -> Self {
            Buffer { bytes: vec![0; cap_pages * PAGE], pages: Cell::new(pages), grows: Cell::new(0) }
        }

        fn base(&self) -> usize {
            self.bytes.as_ptr() as usize
        }
    }

    impl Memory for &Buffer {
        fn heap_base(&self) -> usize {
            // Past stand-ins for the stack and data.
            self.base() + 100
        }
        fn end(&self) -> usize {
            self.base() + self.pages.get() * PAGE
        }
        fn pages(&self) -> usize {
            self.pages.get()
        }
        fn grow(&self, pages: usize) -> bool {
            if (self.pages.get() + pages) * PAGE > self.bytes.len() {
                return false;
            }
            self.grows.set(self.grows.get() + 1);
            self.pages.set(self.pages.get() + pages);
            true
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).expect("layout")
    }

    #[test]
    fn the_initial_memory_is_used_before_memory_grows() {
        let memory = Buffer::new(4, 64);
        let heap = Bump::new(&memory);
        let a = heap.claim(layout(10, 1)).expect("room");
        assert_eq!(a, (&memory).heap_base(), "from the heap base");
        let b = heap.claim(layout(8, 8)).expect("room");
        assert_eq!(b % 8, 0, "aligned");
        assert!((a + 10..a + 18).contains(&b), "right after the first block");
        heap.claim(layout(4 * PAGE - 200, 1)).expect("room");
        assert_eq!(memory.grows.get(), 0, "all of it within the initial 4 pages");
    }

    #[test]
    fn memory_doubles_when_it_must_grow_and_grows_by_what_is_needed_near_the_cap() {
        let memory = Buffer::new(4, 10);
        let heap = Bump::new(&memory);
        heap.claim(layout(4 * PAGE, 1)).expect("room");
        assert_eq!(memory.pages.get(), 8, "doubled");
        assert_eq!(memory.grows.get(), 1);
        // 8 → 16 would pass the cap of 10: grown by the 1 page needed.
        heap.claim(layout(4 * PAGE + 1, 1)).expect("room");
        assert_eq!(memory.pages.get(), 9);
        assert_eq!(heap.claim(layout(2 * PAGE, 1)), None, "past the cap: refused, not wrapped");
    }

    #[test]
    fn the_last_block_is_resized_in_place_and_any_other_is_copied() {
        let memory = Buffer::new(1, 4);
        let heap = Bump::new(&memory);
        unsafe {
            let first = heap.alloc(layout(4, 1));
            first.copy_from_nonoverlapping(b"abcd".as_ptr(), 4);
            let grown = heap.realloc(first, layout(4, 1), 64);
            assert_eq!(grown, first, "the last block grows where it is");
            let other = heap.alloc(layout(4, 1));
            let moved = heap.realloc(grown, layout(64, 1), 128);
            assert!(moved > other, "no longer the last block: copied past it");
            assert_eq!(core::slice::from_raw_parts(moved, 4), b"abcd");
            let big = heap.realloc(moved, layout(128, 1), 3 * PAGE);
            assert_eq!(big, moved, "grown in place across a memory.grow");
            assert_eq!(memory.pages.get(), 4);
        }
    }
}
