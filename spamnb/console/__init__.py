"""The web console of ``spamnb serve --ui``: every verdict's history and its
evidence, learning from it with a click, the model (docs/ui.md).

It runs in a process of its own, forked by the server's parent once the
site model is loaded and privileges are dropped (spamnb.console.process);
the workers hand it one record per check over a Unix stream socket
(spamnb.console.records), written without ever waiting: a full buffer drops
the record and counts it.  The console keeps the records in SQLite
(spamnb.console.history) and serves the page and its JSON API over HTTP
parsed by h11 on its own asyncio loop (spamnb.console.http,
spamnb.console.app); users, roles and sessions in spamnb.console.users and
spamnb.console.sessions.  Nothing here is imported by the server's request
path except spamnb.console.records (the worker side)."""
