cdef bint _sniffs_html(bytes data)
cdef Py_ssize_t _count_ci(str text, const char *word, Py_ssize_t m)
