"""Paths as a user writes them: ``~`` and ``~USER`` read as a shell reads them, or refused in one line."""

import os
from pathlib import Path

from vaezoo.errors import VaezooError


def home_path(path: str | os.PathLike[str], what: str = "the path") -> Path:
    """``path`` with a leading ``~`` read as the home folder and ``~USER`` as USER's, as a shell reads them.

    Where there is no such home folder, pathlib raises a bare RuntimeError and ``os.path.expanduser`` leaves the
    ``~`` as it is (a folder named ``~USER`` in the working folder); this says so in one line.

    Args:
        path: a path as a user gives it.
        what: what the path is, as the error names it (``VAEZOO_HOME``).

    Returns:
        The path, its home folder spelled out.

    Raises:
        VaezooError: a ``~USER`` of no user this machine knows, or a ``~`` where HOME is unset and the user has no
            home folder in the system's user list.
    """
    text = os.fspath(path)
    expanded = os.path.expanduser(text)  # leaves what it cannot expand as it is
    if not text.startswith("~") or expanded != text:
        return Path(expanded)
    user = text[1:].replace(os.sep, "/").split("/", 1)[0]
    why = (f"no user '{user}' is known on this machine" if user else
           "HOME is not set, and this user has no home folder in the system's user list")
    raise VaezooError(f"{what} {text!r} begins with '~{user}', which is no home folder ({why}); write the path "
                      f"whole" + (", or ~/... for your own home folder" if user else ", or set HOME"))
