"""The live process under a pid, for the script tests that check what a script left running (test_gpu_check_dry_run.py,
test_gpu_serve_check.py)."""


def live_args(pid):
    """The argv (bytes) of the process under `pid`, or None where none lives there: gone, or a zombie. Pids are reused
    quickly on a busy machine, so callers check the argv is theirs."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
        with open(f"/proc/{pid}/stat") as f:
            zombie = f.read().split(")")[-1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if zombie else args
