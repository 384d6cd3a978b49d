"""The records of a parsed message (``Mail``, ``Part``, ``MailStats``): plain
classes with slots, made by the compiled parser (spamnb.mail._mail) and re-exported by
spamnb.mail.parser."""

__all__ = ["Mail", "MailStats", "Part"]


class Record:
    """A plain record (no ``dataclasses``: importing it costs ~5 ms of start-up)."""

    __slots__ = ()

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other):
        return type(self) is type(other) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__)


class Part(Record):
    """One leaf MIME part.

    content_type : str -- e.g. "text/plain", lower case
    charset : str -- declared charset, lower case ("" if none)
    encoding : str -- Content-Transfer-Encoding, lower case ("" if none)
    size : int -- size of the (encoded) part body in bytes
    text : str or None -- decoded text of text/* parts, None for other parts
    filename : str
    """

    __slots__ = ("content_type", "charset", "encoding", "size", "text", "filename")

    def __init__(self, content_type, charset, encoding, size, text=None, filename=""):
        self.content_type = content_type
        self.charset = charset
        self.encoding = encoding
        self.size = size
        self.text = text
        self.filename = filename


class MailStats(Record):
    """Counts for a numeric-feature model (all ints; sizes in bytes, text in characters).

    n_bytes (raw size, before truncation), n_header_bytes, n_headers, n_received,
    n_recipients (addresses in To + Cc), n_parts (leaf MIME parts), n_text_parts,
    n_html_parts, n_attachments (non-text leaves), max_depth (deepest MIME nesting),
    text_chars (text/plain), html_chars (text/html, markup included), n_links
    ("href" attributes in HTML + "://" in plain text), n_images ("<img" in HTML),
    n_defects.
    """

    __slots__ = ("n_bytes", "n_header_bytes", "n_headers", "n_received", "n_recipients",
                 "n_parts", "n_text_parts", "n_html_parts", "n_attachments", "max_depth",
                 "text_chars", "html_chars", "n_links", "n_images", "n_defects")

    def __init__(self, **counts):
        # one assignment per count (a setattr loop cost ~2 us per message)
        self.n_bytes = self.n_header_bytes = self.n_headers = self.n_received = 0
        self.n_recipients = self.n_parts = self.n_text_parts = self.n_html_parts = 0
        self.n_attachments = self.max_depth = self.text_chars = self.html_chars = 0
        self.n_links = self.n_images = self.n_defects = 0
        if counts:
            unknown = set(counts) - set(self.__slots__)
            if unknown:
                raise TypeError(f"unknown counts: {sorted(unknown)}")
            for name, value in counts.items():
                setattr(self, name, value)

    def as_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}


class Mail(Record):
    """A parsed message.

    headers : list of (name, value) -- top-level fields, lower-case names, decoded values
    parts : list of Part -- leaf parts in order
    defects : list of str -- e.g. "no-separator", "truncated"
    stats : MailStats
    truncated : bool -- the message was longer than max_bytes
    """

    __slots__ = ("headers", "parts", "defects", "stats", "truncated", "_by_name")

    def __init__(self):
        self.headers = []
        self.parts = []
        self.defects = []
        self.stats = MailStats()
        self.truncated = False
        self._by_name = {}      # name -> [values], filled by parse

    def header(self, name, default=""):
        """The first value of header ``name`` (lower case), or ``default``."""
        values = self._by_name.get(name)
        return values[0] if values else default

    def header_values(self, name):
        """All values of header ``name`` (lower case), in order."""
        return list(self._by_name.get(name, ()))

    @property
    def by_name(self):
        """{lower-case name: [values, in order]} of the top-level fields: the
        parser's own table (not to be modified), for the tokenizer's hot path."""
        return self._by_name
