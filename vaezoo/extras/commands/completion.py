"""``vaezoo completion SHELL``: the script that lets a shell complete vaezoo's commands, options and zoo names.

The script calls ``vaezoo`` at each Tab with the line typed so far in its environment (argcomplete's protocol);
:func:`vaezoo.cli.main` then answers with the completions instead of running a command.
"""

SHELLS = ("bash", "zsh", "fish", "tcsh", "powershell")

_SETUP = ('add to ~/.bashrc or ~/.zshrc: eval "$(vaezoo completion bash)" (zsh: ... completion zsh, after '
          'compinit); fish: vaezoo completion fish > ~/.config/fish/completions/vaezoo.fish')


def add_parser(sub) -> None:
    p = sub.add_parser("completion", help="print the script that makes a shell complete vaezoo's commands, options "
                                          "and zoo names", epilog=_SETUP)
    p.add_argument("shell", choices=SHELLS, help="the shell the script is for")
    p.set_defaults(func=run)


def run(args) -> int:
    import argcomplete

    print(argcomplete.shellcode(["vaezoo"], shell=args.shell), end="")
    return 0


def complete_card(prefix: str, **_) -> list[str]:
    """The completions of a CARD argument: the zoo names that begin with ``prefix``, then the paths that do."""
    from argcomplete.completers import FilesCompleter

    from vaezoo.entries.catalog import discover, natural_key

    names = sorted((name for name in discover() if name.startswith(prefix)), key=natural_key)
    return names + list(FilesCompleter()(prefix))
