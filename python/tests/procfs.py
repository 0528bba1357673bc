"""What /proc says about a process the tests started, for the checks that nothing they started outlives them."""


def live_args(pid):
    """The argument list (bytes) of the live process under `pid`; None where there is none: gone, or a zombie
    waiting for its parent."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        with open(f"/proc/{pid}/stat") as f:
            zombie = f.read().split(")")[-1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if zombie else args
