"""How a process a test started exited: its exit status against the one expected, and its
stderr searched for a sanitizer report. Standard library only, no side effects: the test
harness (harness.py) and the soak (ops/lib/soak.py) both judge rankd's exit with it."""
import re

# A report of ASan, LSan, UBSan or TSan. UBSan goes on after a report unless told to halt,
# so a process may exit 0 with one in its stderr.
_SANITIZER_REPORT = re.compile(r"^(==\d+==)?(ERROR|WARNING): \w+Sanitizer|^SUMMARY: \w+Sanitizer|"
                               r"^\S+:\d+:\d+: runtime error: ", re.MULTILINE)


def exit_problem(what, code, stderr_text, expect=0):
    """None when a process that exited with `code` exited as expected (`expect`: a code, or
    a set of codes) and its stderr holds no sanitizer report; else what went wrong, with
    the report (or the end of its stderr)."""
    expected = expect if isinstance(expect, (set, frozenset, tuple, list)) else {expect}
    report = _SANITIZER_REPORT.search(stderr_text)
    if code in expected and not report:
        return None
    why = f"exited with {code}" if code not in expected else f"exited with {code} but stderr has a sanitizer report"
    start = max(0, report.start() - 200) if report else max(0, len(stderr_text) - 4000)
    return f"{what} {why} (expected {sorted(expected)}):\n{stderr_text[start:start + 6000]}"


def check_exit(what, code, stderr_text, expect=0):
    """Raises AssertionError when exit_problem finds one."""
    problem = exit_problem(what, code, stderr_text, expect)
    if problem:
        raise AssertionError(problem)
    return code
