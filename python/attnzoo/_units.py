"""Numbers as people read them, written once for every report (the CLI's inspect does the same in C++)."""


def human_parameters(n):
    """Parameter counts as model cards write them: 120.8K, 135M, 1.2B (one decimal, a trailing .0 dropped)."""
    v, unit = float(n), ""
    for u in ("K", "M", "B", "T"):
        if v < 999.95:
            break
        v, unit = v / 1000, u
    text = f"{v:.0f}" if not unit else f"{v:.1f}".removesuffix(".0")
    return text + unit
