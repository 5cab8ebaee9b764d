"""A stand-in for the Hugging Face Hub on 127.0.0.1, for tests: only the endpoints huggingface_hub calls.

Downloads: repository info at a revision (``/api/models/REPO/revision/REV``, with each file's size and blob id
when asked ``?blobs=true``), the file tree (``/api/models/REPO/tree/REV``) and files (``HEAD``/``GET
/REPO/resolve/REV/PATH``, with the ``X-Repo-Commit``, ``ETag`` and ``Content-Length`` headers huggingface_hub
relies on). Uploads: repository creation
(``/api/repos/create``), README metadata validation, the upload mode of each file (``preupload``, always
"regular": contents travel base64-encoded in the commit) and the commit itself (NDJSON). Errors carry the
``X-Error-Code`` header (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``) that huggingface_hub maps
to its exceptions. Point huggingface_hub at it with ``HF_ENDPOINT=hub.endpoint``.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from kit import serving

GITATTRIBUTES = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"


@dataclass
class Repo:
    """A repository: the whole tree of each commit, its message, and branches and tags pointing at commits."""

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)


class _Missing(Exception):
    """An answer of 404 with huggingface_hub's error code (``RepoNotFound``, ...)."""

    def __init__(self, code: str, commit: str | None = None):
        super().__init__(code)
        self.code, self.commit = code, commit


def git_blob_id(data: bytes) -> str:
    """The git object id of a file's contents, which the Hub uses as a regular file's ETag."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeHub:
    """The Hub's state and a log of the requests it answered.

    Attributes:
        repos: repository id (``OWNER/REPO``) -> repository.
        requests: ``(method, path)`` of every request, in order.
        authorizations: the ``Authorization`` header of every request (None where it had none), in order.
        read_only: answer every write (creating a repository, committing) with 401, as the Hub does without
            a token allowed to write.
        listed_sizes: path -> the size the Hub's listings (the file tree, the repository's files with
            ``?blobs=true``) give for it instead of its own: a Hub whose listing lies.
        port: the port it listens on, once served.
    """

    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    read_only: bool = False
    listed_sizes: dict[str, int] = field(default_factory=dict)
    port: int = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def commit(self, repo_id: str, files: dict[str, bytes], delete: Iterable[str] = (), branch: str = "main") -> str:
        """Commit ``files`` (path -> contents) and the deletion of ``delete`` on ``branch``; returns the commit."""
        repo = self.repos.setdefault(repo_id, Repo())
        tree = dict(repo.commits.get(repo.refs.get(branch, ""), {}))
        tree.update(files)
        for path in delete:
            tree.pop(path, None)
        commit = hashlib.sha1(f"{repo_id} {len(repo.commits)}".encode()
                              + json.dumps(sorted((p, git_blob_id(d)) for p, d in tree.items())).encode()).hexdigest()
        repo.commits[commit] = tree
        repo.refs[branch] = commit
        return commit

    def tag(self, repo_id: str, name: str, commit: str) -> None:
        self.repos[repo_id].refs[name] = commit

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """The tree of ``repo_id`` at ``revision``."""
        repo, commit = self._resolve(repo_id, revision)
        return repo.commits[commit]

    def _resolve(self, repo_id: str, revision: str) -> tuple[Repo, str]:
        repo = self.repos.get(repo_id)
        if repo is None:
            raise _Missing("RepoNotFound")
        commit = repo.refs.get(revision, revision)
        if commit not in repo.commits:
            raise _Missing("RevisionNotFound")
        return repo, commit

    def downloads(self, repo_id: str, path: str) -> int:
        """How many times ``path`` of ``repo_id`` was downloaded, at any revision."""
        return sum(method == "GET" and p.startswith(f"/{repo_id}/resolve/") and p.endswith(f"/{path}")
                   for method, p in self.requests)

    # --- answers ---------------------------------------------------------------------------------------------

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """``(status, headers, body)`` for one request."""
        parts = [unquote(p) for p in urlsplit(path).path.strip("/").split("/")]
        if method == "POST" and self.read_only:
            return _json({"error": "Invalid credentials in Authorization header"}, 401)
        try:
            if parts[:2] == ["api", "models"] and len(parts) >= 4:
                repo_id, rest = "/".join(parts[2:4]), parts[4:]
                if not rest or rest[0] == "revision":
                    return self._info(repo_id, rest[1] if rest else "main", "blobs=" in urlsplit(path).query)
                if rest[0] == "tree":
                    return self._tree(repo_id, rest[1])
                if rest[0] == "preupload":
                    self._resolve(repo_id, rest[1])
                    files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
                             for f in json.loads(body)["files"]]
                    return _json({"files": files})
                if rest[0] == "commit":
                    return self._commit(repo_id, rest[1], body)
                if rest[0] == "branch":
                    return self._branch(repo_id, rest[1], json.loads(body or b"{}"))
            if parts == ["api", "repos", "create"]:
                return self._create(json.loads(body))
            if parts == ["api", "validate-yaml"]:
                return _json({})
            if len(parts) >= 5 and parts[2] == "resolve":
                return self._file(method, "/".join(parts[:2]), parts[3], "/".join(parts[4:]))
        except _Missing as missing:
            headers = {"X-Error-Code": missing.code, **({"X-Repo-Commit": missing.commit} if missing.commit else {})}
            status, _, payload = _json({"error": missing.code}, 404)
            return status, {**headers, "Content-Type": "application/json"}, payload
        return _json({"error": f"the fake Hub does not answer {method} {path}"}, 400)

    def _info(self, repo_id: str, revision: str, blobs: bool = False):
        repo, commit = self._resolve(repo_id, revision)
        siblings = [{"rfilename": p, **({"size": self._listed_size(p, d), "blobId": git_blob_id(d)} if blobs else {})}
                    for p, d in sorted(repo.commits[commit].items())]
        return _json({"id": repo_id, "sha": commit, "private": False, "siblings": siblings})

    def _tree(self, repo_id: str, revision: str):
        repo, commit = self._resolve(repo_id, revision)
        return _json([{"type": "file", "path": p, "size": self._listed_size(p, d), "oid": git_blob_id(d)}
                      for p, d in sorted(repo.commits[commit].items())])

    def _listed_size(self, path: str, data: bytes) -> int:
        return self.listed_sizes.get(path, len(data))

    def _file(self, method: str, repo_id: str, revision: str, path: str):
        repo, commit = self._resolve(repo_id, revision)
        data = repo.commits[commit].get(path)
        if data is None:
            raise _Missing("EntryNotFound", commit)
        headers = {"X-Repo-Commit": commit, "ETag": f'"{git_blob_id(data)}"', "Content-Length": str(len(data))}
        return 200, headers, data if method == "GET" else b""

    def _create(self, payload: dict):
        repo_id = f"{payload['organization']}/{payload['name']}"
        if repo_id in self.repos:
            return _json({"error": "You already created this model repo", "url": f"{self.endpoint}/{repo_id}"}, 409)
        self.commit(repo_id, {".gitattributes": GITATTRIBUTES})
        return _json({"url": f"{self.endpoint}/{repo_id}"})

    def _branch(self, repo_id: str, branch: str, payload: dict):
        repo, commit = self._resolve(repo_id, payload.get("startingPoint", "main"))
        if branch in repo.refs:
            return _json({"error": "Reference already exists"}, 409)
        repo.refs[branch] = commit
        return _json({})

    def _commit(self, repo_id: str, revision: str, body: bytes):
        self._resolve(repo_id, revision)
        added, deleted, message, parent = {}, [], "", None
        for line in body.splitlines():
            item = json.loads(line)
            if item["key"] == "header":
                message, parent = item["value"]["summary"], item["value"].get("parentCommit")
            elif item["key"] == "file":
                added[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
            elif item["key"] == "deletedFile":
                deleted.append(item["value"]["path"])
        if parent is not None and parent != self._resolve(repo_id, revision)[1]:  # 412 Precondition Failed, as the Hub
            return _json({"error": "A commit has happened since. Please refresh and try again."}, 412)
        commit = self.commit(repo_id, added, deleted, branch=revision)
        self.repos[repo_id].messages[commit] = message
        return _json({"commitUrl": f"{self.endpoint}/{repo_id}/commit/{commit}", "commitOid": commit})


def _json(data, status: int = 200) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(data).encode()


@contextmanager
def serve_hub(hub: FakeHub) -> Iterator[FakeHub]:
    """Answer as ``hub`` on 127.0.0.1 in a thread for the duration of the ``with`` block."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _respond(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hub.requests.append((self.command, self.path))
            hub.authorizations.append(self.headers.get("Authorization"))
            status, headers, payload = hub.answer(self.command, self.path, body)
            self.send_response(status)
            headers.setdefault("Content-Length", str(len(payload)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout under test)
                    pass

        do_GET = do_HEAD = do_POST = _respond

        def log_message(self, *args) -> None:
            pass

    with serving(Handler) as port:
        hub.port = port
        yield hub
