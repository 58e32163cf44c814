"""The project's errors: one-line messages that can be caught the way torch.mm's are.

torch.mm raises RuntimeError for bad input (shapes, dtypes, devices), so code around a matmul often says
`except RuntimeError`. Every error this project raises derives from `HgemmError(RuntimeError)`; the value and type
errors also derive from ValueError and TypeError, so `except ValueError` / `except TypeError` keep working:

    try:
        c = triton_kernels.hgemm(a, b)
    except RuntimeError as e:       # HgemmValueError, HgemmTypeError, a build or arch error alike
        ...

tests/test_errors.py walks the packages and fails on a raise of a bare ValueError, TypeError or RuntimeError.
"""
from __future__ import annotations


class HgemmError(RuntimeError):
    """Any error raised by this project's kernels, operators, modules and harness."""


class HgemmValueError(HgemmError, ValueError):
    """A bad value: shapes that cannot be multiplied, an unknown kernel name, a wrong `acc=`, an `out=` that
    overlaps an input."""


class HgemmTypeError(HgemmError, TypeError):
    """A bad type: not a tensor, a dtype a kernel does not take, mixed dtypes."""


def both_given(who: str, name: str, alias: str, value, alias_value) -> HgemmValueError:
    """The one-line error for a keyword given under both its name and its accepted alias."""
    return HgemmValueError(f"{who}: {alias}= is another name for {name}=; give one, got {name}={value!r} and "
                           f"{alias}={alias_value!r}")


def pick(who: str, name: str, value, alias: str, alias_value, default):
    """The value of a keyword that also has an accepted alias (`variant=` for `kernel=`): the one given, `default`
    when neither is, an error when both are."""
    if alias_value is None:
        return default if value is None else value
    if value is not None:
        raise both_given(who, name, alias, value, alias_value)
    return alias_value


def error_line(e: BaseException) -> str:
    """An exception as one line for a report: its type and the first line of its message."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:200]}" if text else type(e).__name__
