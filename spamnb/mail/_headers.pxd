cdef tuple _split_headers(bytes data)
cdef list _parse_fields(str text, Py_ssize_t max_chars, decode, dict by_name)
cdef tuple _content_type(str value)
cdef list _block_fields(bytes block, dict by_name)
