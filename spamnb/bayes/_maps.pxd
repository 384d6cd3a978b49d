"""Anonymous memory mappings for the compiled counting arrays (``_count``'s
``VariantCounter``, ``_merge``'s ``MergeTable``): pages made as they are
written, grown by ``mremap`` (moved by the kernel, never copied, no second
array while one grows) and given back to the system when unmapped, where the
C heap would keep them."""

cdef extern from *:
    """
    #include <sys/mman.h>
    #include <string.h>
    /* NULL for 0 bytes or when the system refuses. */
    static void *_spamnb_map(size_t n) {
        void *p;
        if (n == 0) return NULL;
        p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    static void _spamnb_unmap(void *p, size_t n) {
        if (p != NULL && n != 0) munmap(p, n);
    }
    /* The mapping p of old bytes resized to n (> 0): moved by the kernel, not copied, on Linux. */
    static void *_spamnb_remap(void *p, size_t old, size_t n) {
        void *q;
        if (p == NULL || old == 0) return _spamnb_map(n);
    #ifdef MREMAP_MAYMOVE
        q = mremap(p, old, n, MREMAP_MAYMOVE);
        return q == MAP_FAILED ? NULL : q;
    #else
        q = _spamnb_map(n);
        if (q != NULL) { memcpy(q, p, old < n ? old : n); munmap(p, old); }
        return q;
    #endif
    }
    """
    void *_map "_spamnb_map"(size_t n) noexcept nogil
    void _unmap "_spamnb_unmap"(void *p, size_t n) noexcept nogil
    void *_remap "_spamnb_remap"(void *p, size_t old, size_t n) noexcept nogil


cdef inline int _grow(void **p, Py_ssize_t *capacity, Py_ssize_t needed, Py_ssize_t itemsize) except -1:
    """Make the mapping ``*p`` of ``*capacity`` items hold at least ``needed``
    (grown by half at least)."""
    cdef Py_ssize_t new_capacity
    cdef void *q
    if needed <= capacity[0]:
        return 0
    new_capacity = max(needed, capacity[0] + capacity[0] // 2, 1024)
    q = _remap(p[0], capacity[0] * itemsize, new_capacity * itemsize)
    if q == NULL:
        raise MemoryError()
    p[0] = q
    capacity[0] = new_capacity
    return 0
