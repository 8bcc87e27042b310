//! Disjoint writes into one output buffer from several threads.

use std::marker::PhantomData;

/// A `&mut [T]` that parts of one job write through at indices no other part touches (each
/// part owns its rows of the output). The borrow it was made from lasts as long as it does.
pub struct SharedMut<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

// Safety: the users only write disjoint indices (the contract of `set` / `slice`), and `T` is
// sent to other threads only as plain values.
unsafe impl<T: Send> Send for SharedMut<'_, T> {}
unsafe impl<T: Send> Sync for SharedMut<'_, T> {}

impl<'a, T> SharedMut<'a, T> {
    pub fn new(s: &'a mut [T]) -> SharedMut<'a, T> {
        SharedMut { ptr: s.as_mut_ptr(), len: s.len(), _borrow: PhantomData }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// # Safety
    /// No other part reads or writes index `i` while the job runs.
    #[inline]
    pub unsafe fn set(&self, i: usize, v: T) {
        assert!(i < self.len);
        *self.ptr.add(i) = v;
    }

    /// # Safety
    /// No other part reads or writes `range` while the job runs, and no two live slices from
    /// one part overlap.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice(&self, range: std::ops::Range<usize>) -> &mut [T] {
        assert!(range.start <= range.end && range.end <= self.len);
        std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.end - range.start)
    }
}
