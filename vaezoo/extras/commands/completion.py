"""``vaezoo completion SHELL``: the script that lets a shell complete vaezoo's commands, options and zoo names.

The script calls ``vaezoo`` at each Tab with the line typed so far in its environment (argcomplete's protocol);
:func:`vaezoo.cli.main` then answers with the completions instead of running a command.
"""

SHELLS = ("bash", "zsh", "fish", "tcsh", "powershell")

_SETUP = ('add to ~/.bashrc or ~/.zshrc: eval "$(vaezoo completion bash)" (zsh: ... completion zsh, after '
          'compinit); fish: vaezoo completion fish > ~/.config/fish/completions/vaezoo.fish')

HELP = ("print the script that makes a shell complete vaezoo's commands, options "
        "and zoo names")
"""What ``vaezoo --help`` says of the command."""


def add_arguments(p) -> None:
    p.epilog = _SETUP
    p.add_argument("shell", choices=SHELLS, help="the shell the script is for")


def run(args) -> int:
    import argcomplete

    print(argcomplete.shellcode(["vaezoo"], shell=args.shell), end="")
    return 0
