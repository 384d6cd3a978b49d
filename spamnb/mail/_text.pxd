cdef str _decode_text(bytes data, str charset, fallback)
