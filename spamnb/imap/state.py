"""What ``spamnb imap scan`` has seen: per account and folder, the folder's
UIDVALIDITY and the highest UID scanned.  A JSON file, written atomically
(``spamnb.persistence.store.replace_file``: a temporary file beside it, fsync,
rename, the folder fsynced) after every batch, so a run that
is killed starts again after the last batch it finished."""

import json
import os

__all__ = ["ScanState"]


class ScanState:
    def __init__(self, path):
        self.path = os.fspath(path)
        self.data = {"version": 1, "accounts": {}}
        try:
            with open(self.path, "rb") as f:
                data = json.loads(f.read(1 << 24))
            if isinstance(data, dict) and isinstance(data.get("accounts"), dict):
                self.data = data
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            raise ValueError(f"{self.path}: not a scan state file ({exc}); move it away to scan from the start")

    def last_uid(self, account, folder, uidvalidity):
        """The highest UID scanned, 0 when the folder's UIDVALIDITY changed (its UIDs mean other messages)."""
        entry = self.data["accounts"].get(account, {}).get(folder)
        if not isinstance(entry, dict) or entry.get("uidvalidity") != uidvalidity:
            return 0
        return int(entry.get("last_uid", 0))

    def record(self, account, folder, uidvalidity, last_uid):
        self.data["accounts"].setdefault(account, {})[folder] = {"uidvalidity": uidvalidity, "last_uid": last_uid}
        self.save()

    def save(self):
        from spamnb.persistence.store import replace_file

        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        text = json.dumps(self.data, indent=1, sort_keys=True).encode()
        replace_file(os.path.abspath(self.path), lambda f: f.write(text), mode=0o600)
