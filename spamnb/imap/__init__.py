"""Filtering and learning over IMAP, for mailboxes on a server the user does
not run (``spamnb imap scan``, ``spamnb imap learn``): the connection
(:mod:`spamnb.imap.client`), the scan state (:mod:`spamnb.imap.state`) and
the two jobs (:mod:`spamnb.imap.jobs`).  The model is not known here: the
command line hands in the functions that classify, mark and learn a message.
"""

DEADLINE = 3600.0             # seconds a whole `spamnb imap` run may take (--timeout)
MAX_SIZE = 10 * 1024 * 1024   # bytes: a larger message is left where it is, unread (--max-size)
