#!/usr/bin/env python3
"""A file system that forgets what was never fsynced: the power-loss fault's layer (the idea
of LazyFS, Ramos et al., done here with an undo log instead of a page cache).

It serves a backing directory at a mount point (FUSE, through fusepy). Reads and writes go
straight through to the backing files, so the broker sees an ordinary file system; but for
every file written since its last fsync it keeps, in memory, what a power cut would bring
back: the file's size at that fsync and the original bytes of each 4 KiB page of that synced
region that has been overwritten since. ``fsync`` / ``fdatasync`` (also the kernel's, after
each write to a file opened O_SYNC / O_DSYNC) make the file's writes durable: its undo entry
is dropped. ``power-off`` (on the control socket) restores every file to its synced state and
from then on refuses every change (EIO) until the mount ends: the broker is killed right
after (harness: ``ComposeCluster.power_off``), and its next start mounts afresh.

By default nothing unsynced is ever written back (LazyFS's model: the worst case, a power cut
within the kernel's writeback window of every write). ``--writeback S`` models the kernel's
periodic writeback (Linux: dirty data older than 30 s): a file's unsynced writes count as
written back once the oldest of them is S seconds old (per file, not per page: coarse).

Files are known by path: a hard link's fsync does not make its other names' writes durable
(the brokers here make none). Between a node's power-off and its SIGKILL (one ``docker exec``
later) the node still runs: every change and every fsync fails (EIO), so nothing unsynced can
be confirmed as synced, but pages in the kernel's cache may still be read.

Metadata (create, mkdir, rename, unlink, chmod ...) is durable at once, as in LazyFS's
default: a file created and never fsynced survives a power cut, empty. Runs inside the
broker's container with the system python3 and Debian's python3-fusepy: stdlib and fusepy
only (not a package of the project's, on purpose).

    lazyfs.py start MOUNTPOINT            mount MOUNTPOINT over MOUNTPOINT's sibling .lazyfs-<name>
                                          in the background, return once mounted
              [--writeback S]             (also serve) unsynced writes S seconds old count as
                                          written back, as the kernel's writeback would
                                          (MQCHAOS_LAZYFS_WRITEBACK; default never: LazyFS's
                                          worst case)
    lazyfs.py serve BACKING MOUNTPOINT    the same, in the foreground
    lazyfs.py ctl [status|power-off]      ask the running file system (JSON answer)
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time

PAGE = 4096
SOCKET = os.environ.get("MQCHAOS_LAZYFS_SOCKET", "/run/mqchaos-lazyfs.sock")

try:  # the control client and the pure undo log need no FUSE
    try:
        from fuse import FUSE, FuseOSError, Operations, fuse_get_context
    except ImportError:  # Debian's python3-fusepy names the module fusepy
        from fusepy import FUSE, FuseOSError, Operations, fuse_get_context
except (ImportError, OSError, EnvironmentError):  # pragma: no cover - checked where it is needed
    FUSE = None
    Operations = object

    class FuseOSError(OSError):  # type: ignore[no-redef]
        def __init__(self, code: int) -> None:
            super().__init__(code, os.strerror(code))


class Unsynced:
    """What a power cut would undo in one file: its size at the last fsync, and the synced
    bytes of each page overwritten since (clipped to that size)."""
    __slots__ = ("synced_size", "pages", "written", "since")

    def __init__(self, synced_size: int) -> None:
        self.synced_size = synced_size
        self.pages: dict[int, bytes] = {}
        self.written = 0
        self.since = time.monotonic()  # the oldest write a power cut would take back


class UndoLog:
    """The durable state of every file, kept as the changes that a power cut takes back.
    ``save`` must be called before the backing bytes ``[start, end)`` change."""

    def __init__(self) -> None:
        self.files: dict[str, Unsynced] = {}

    def entry(self, path: str, size_now: int) -> Unsynced:
        e = self.files.get(path)
        if e is None:  # nothing unsynced yet: what the file holds now is durable
            e = self.files[path] = Unsynced(size_now)
        return e

    def save(self, path: str, fd: int, start: int, end: int) -> Unsynced:
        e = self.entry(path, os.fstat(fd).st_size)
        top = min(end, e.synced_size)
        for page in range(start // PAGE, (top + PAGE - 1) // PAGE):
            if page not in e.pages:
                keep = min(PAGE, e.synced_size - page * PAGE)
                data = os.pread(fd, keep, page * PAGE)
                e.pages[page] = data  # short only where an earlier truncate saved it already
        return e

    def synced(self, path: str) -> None:
        self.files.pop(path, None)

    def written_back(self, age: float, now: float | None = None) -> int:
        """Files whose unsynced writes are ``age`` seconds old count as written back (the
        kernel's periodic writeback); return how many."""
        now = time.monotonic() if now is None else now
        old = [p for p, e in self.files.items() if now - e.since >= age]
        for p in old:
            del self.files[p]
        return len(old)

    def moved(self, old: str, new: str) -> None:
        for key in [k for k in self.files if k == new or k.startswith(new + "/")]:
            del self.files[key]
        for key in [k for k in self.files if k == old or k.startswith(old + "/")]:
            self.files[new + key[len(old):]] = self.files.pop(key)

    def removed(self, path: str) -> None:
        self.files.pop(path, None)

    def pending(self) -> dict:
        return {"files": len(self.files), "unsynced_bytes": sum(e.written for e in self.files.values())}

    def forget(self, full_path) -> dict:
        """Put every file back as it was at its last fsync; return what was dropped."""
        dropped: dict = {"files": 0, "unsynced_bytes": 0, "truncated_bytes": 0, "restored_bytes": 0, "missing": 0}
        # which files lost what (the largest 20): the evidence a finding points to
        top = sorted(self.files.items(), key=lambda kv: -kv[1].written)[:20]
        dropped["by_file"] = {path: e.written for path, e in top}
        for path, e in sorted(self.files.items()):
            try:
                fd = os.open(full_path(path), os.O_WRONLY)
            except FileNotFoundError:
                dropped["missing"] += 1
                continue
            except OSError as exc:
                dropped.setdefault("errors", {})[path] = str(exc)
                continue
            try:
                size = os.fstat(fd).st_size
                for page, data in sorted(e.pages.items()):
                    os.pwrite(fd, data, page * PAGE)
                    dropped["restored_bytes"] += len(data)
                os.ftruncate(fd, e.synced_size)
                dropped["truncated_bytes"] += max(0, size - e.synced_size)
            except OSError as exc:  # the other files are still put back
                dropped.setdefault("errors", {})[path] = str(exc)
            finally:
                os.close(fd)
            dropped["files"] += 1
            dropped["unsynced_bytes"] += e.written
        self.files.clear()
        return dropped


class LazyFS(Operations):  # type: ignore[misc,valid-type]
    """A passthrough file system over ``root`` whose unsynced writes an ``UndoLog`` can take back."""

    def __init__(self, root: str, writeback: float | None = None) -> None:
        self.root = os.path.realpath(root)
        self.writeback = writeback
        self._mutex = threading.RLock()
        self.log = UndoLog()
        self.off = False
        self.dropped: dict | None = None
        self.appending: set[int] = set()
        self.counts = {"writes": 0, "fsyncs": 0, "written_back": 0}
        if writeback:
            threading.Thread(target=self._writeback_loop, daemon=True).start()

    # ---- control --------------------------------------------------------------------------
    def status(self) -> dict:
        with self._mutex:
            return {"power": "off" if self.off else "on", "writeback_s": self.writeback, **self.log.pending(),
                    **self.counts, "dropped": self.dropped}

    def _writeback_loop(self) -> None:
        tick = threading.Event()
        while not tick.wait(min(1.0, self.writeback / 4)):  # type: ignore[operator]
            with self._mutex:
                if self.off:
                    return
                self.counts["written_back"] += self.log.written_back(self.writeback)  # type: ignore[arg-type]

    def power_off(self) -> dict:
        with self._mutex:
            if not self.off:
                self.off = True  # first: whatever forget meets, nothing changes afterwards
                # the writes and fsyncs seen since the mount beside what was dropped: 0 bytes
                # dropped after many writes says the broker synced each one (R18)
                self.dropped = {**self.log.forget(self._full), "writes_seen": self.counts["writes"],
                                "fsyncs_seen": self.counts["fsyncs"]}
            return {"power": "off", "dropped": self.dropped}

    # ---- helpers ----------------------------------------------------------------------------
    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _alive(self) -> None:
        if self.off:
            raise FuseOSError(errno.EIO)

    def _owned(self, full: str) -> None:
        uid, gid, _ = fuse_get_context()
        os.lchown(full, uid, gid)

    # ---- reads: straight through ----------------------------------------------------------------
    def access(self, path, mode):
        if not os.access(self._full(path), mode):
            raise FuseOSError(errno.EACCES)

    def getattr(self, path, fh=None):
        st = os.fstat(fh) if fh is not None else os.lstat(self._full(path))
        return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime",
                                            "st_nlink", "st_size", "st_uid", "st_ino", "st_blocks")}

    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._full(path))]

    def readlink(self, path):
        return os.readlink(self._full(path))

    def statfs(self, path):
        sv = os.statvfs(self._full(path))
        return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                            "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    # ---- opening ------------------------------------------------------------------------------
    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC):
            self._alive()
        with self._mutex:
            if flags & os.O_TRUNC:
                self.truncate(path, 0)
            flags &= ~(os.O_TRUNC | os.O_APPEND | os.O_CREAT)
            if flags & os.O_ACCMODE == os.O_WRONLY:  # pre-images are read through this fd
                flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
            fd = os.open(self._full(path), flags)
            if flags & os.O_APPEND:
                self.appending.add(fd)
            return fd

    def create(self, path, mode, fi=None):
        with self._mutex:
            self._alive()
            full = self._full(path)
            fd = os.open(full, os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)
            self._owned(full)
            self.log.removed(path)  # a new file: nothing of an old one to bring back
            return fd

    def release(self, path, fh):
        self.appending.discard(fh)
        os.close(fh)

    def flush(self, path, fh):
        return 0

    # ---- writes: kept in the undo log until fsync ------------------------------------------------
    def write(self, path, data, offset, fh):
        with self._mutex:
            self._alive()
            if fh in self.appending:
                offset = os.fstat(fh).st_size
            e = self.log.save(path, fh, offset, offset + len(data))
            n = os.pwrite(fh, data, offset)
            e.written += n
            self.counts["writes"] += 1
            return n

    def truncate(self, path, length, fh=None):
        with self._mutex:
            self._alive()
            full = self._full(path)
            fd = os.open(full, os.O_RDWR) if fh is None else fh
            try:
                size = os.fstat(fd).st_size
                if length < size:
                    self.log.save(path, fd, length, size)
                else:
                    self.log.entry(path, size)
                os.ftruncate(fd, length)
            finally:
                if fh is None:
                    os.close(fd)

    def fsync(self, path, datasync, fh):
        # Durable from the instant it is asked for (later writes open a new entry). The backing
        # file's own fsync runs outside the lock, so writes to other files do not queue
        # behind the disk; it keeps an fsync's cost close to the real one.
        with self._mutex:
            self._alive()
            self.log.synced(path)
            self.counts["fsyncs"] += 1
        (os.fdatasync if datasync else os.fsync)(fh)
        return 0

    def fsyncdir(self, path, datasync, fh):
        self._alive()
        return 0

    # ---- metadata: durable at once ----------------------------------------------------------------
    def chmod(self, path, mode):
        self._alive()
        os.chmod(self._full(path), mode)

    def chown(self, path, uid, gid):
        self._alive()
        os.lchown(self._full(path), uid, gid)

    def utimens(self, path, times=None):
        self._alive()
        os.utime(self._full(path), times, follow_symlinks=False)

    def mkdir(self, path, mode):
        with self._mutex:
            self._alive()
            full = self._full(path)
            os.mkdir(full, mode)
            self._owned(full)

    def mknod(self, path, mode, dev):
        with self._mutex:
            self._alive()
            full = self._full(path)
            os.mknod(full, mode, dev)
            self._owned(full)

    def rmdir(self, path):
        with self._mutex:
            self._alive()
            os.rmdir(self._full(path))

    def unlink(self, path):
        with self._mutex:
            self._alive()
            os.unlink(self._full(path))
            self.log.removed(path)

    def rename(self, old, new):
        with self._mutex:
            self._alive()
            os.rename(self._full(old), self._full(new))
            self.log.moved(old, new)

    def symlink(self, target, source):
        with self._mutex:
            self._alive()
            full = self._full(target)
            os.symlink(source, full)
            self._owned(full)

    def link(self, target, source):
        with self._mutex:
            self._alive()
            os.link(self._full(source), self._full(target))


# ---- control socket ---------------------------------------------------------------------------
def _control_server(fs: LazyFS, path: str) -> socketserver.UnixStreamServer:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            cmd = self.rfile.readline().decode().strip()
            reply = {"status": fs.status, "power-off": fs.power_off}.get(cmd)
            out = reply() if reply else {"error": f"unknown command {cmd!r}"}
            self.wfile.write((json.dumps(out) + "\n").encode())

    if os.path.exists(path):
        os.unlink(path)
    server = socketserver.ThreadingUnixStreamServer(path, Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def ctl(command: str, path: str = SOCKET, timeout: float = 30) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall((command + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


def serve(backing: str, mountpoint: str, socket_path: str = SOCKET, writeback: float | None = None) -> None:
    if FUSE is None:
        sys.exit("lazyfs: fusepy (and libfuse2) are not installed")
    fs = LazyFS(backing, writeback)
    _control_server(fs, socket_path)
    # No kernel caching of attributes or entries: sizes must be the file system's own answer
    # right after a power-off; allow_other: the broker runs as its own user.
    FUSE(fs, mountpoint, foreground=True, nothreads=False, allow_other=True, default_permissions=True,
         use_ino=True, attr_timeout=0, entry_timeout=0, negative_timeout=0, big_writes=True,
         fsname="mqchaos-lazyfs", subtype="lazyfs")


def mounted(mountpoint: str) -> bool:
    target = os.path.realpath(mountpoint)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == target and line.split()[2].startswith("fuse") for line in f)


def start(mountpoint: str, socket_path: str = SOCKET, writeback: float | None = None, timeout: float = 30) -> str:
    """Mount ``mountpoint`` over its sibling backing directory (what the volume holds), in a
    background process; return once mounted. The backing gets the mount point's owner."""
    mountpoint = os.path.realpath(mountpoint)
    backing = os.path.join(os.path.dirname(mountpoint), ".lazyfs-" + os.path.basename(mountpoint))
    os.makedirs(mountpoint, exist_ok=True)
    os.makedirs(backing, exist_ok=True)
    # libfuse keeps a file unlinked while open as .fuse_hidden*; a mount that died (power
    # loss) leaves them behind, and a directory holding one cannot be removed
    for d, _, names in os.walk(backing):
        for name in names:
            if name.startswith(".fuse_hidden"):
                os.unlink(os.path.join(d, name))
    st = os.stat(mountpoint)
    os.chown(backing, st.st_uid, st.st_gid)
    log = open(f"/tmp/lazyfs-{os.path.basename(mountpoint)}.log", "ab")
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", backing, mountpoint,
                             "--socket", socket_path, *(["--writeback", str(writeback)] if writeback else [])],
                            stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not (mounted(mountpoint) and os.path.exists(socket_path)):
        failed = (f"exited ({proc.returncode})" if proc.poll() is not None else
                  f"did not mount {mountpoint} in {timeout:g}s" if time.monotonic() > deadline else None)
        if failed:
            with open(log.name, errors="replace") as f:
                sys.exit(f"lazyfs: the file system {failed}; {log.name} ends:\n{f.read()[-2000:]}")
        time.sleep(0.05)
    return backing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lazyfs", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    wb = os.environ.get("MQCHAOS_LAZYFS_WRITEBACK") or None
    for name in ("serve", "start"):
        p = sub.add_parser(name)
        if name == "serve":
            p.add_argument("backing")
        p.add_argument("mountpoint")
        p.add_argument("--socket", default=SOCKET)
        p.add_argument("--writeback", type=float, default=float(wb) if wb else None,
                       help="seconds after which unsynced writes count as written back (default: never)")
    p = sub.add_parser("ctl")
    p.add_argument("command", choices=["status", "power-off"])
    p.add_argument("--socket", default=SOCKET)
    a = ap.parse_args(argv)
    if a.cmd == "serve":
        serve(a.backing, a.mountpoint, a.socket, a.writeback)
    elif a.cmd == "start":
        print(start(a.mountpoint, a.socket, a.writeback))
    else:
        print(json.dumps(ctl(a.command, a.socket)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
