"""Progress bars that a saved notebook shows in their final state.

In a terminal this is tqdm's text bar on stderr. In a Jupyter kernel it is
one line of text displayed with a display id and rewritten in place
(IPython's ``update_display``): JupyterLab, nbclient and ``nbconvert
--execute`` all store the last version in the notebook, so GitHub and
nbviewer show "80/80". tqdm's own notebook bar (``tqdm.auto``) is a widget
whose saved text is the one it had when first drawn ("0/80"), and a text bar
on stderr is saved as every one of its carriage-return updates.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm

__all__ = ["progress_bar", "in_notebook"]


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (the test tqdm.autonotebook uses)."""
    shell = sys.modules.get("IPython")
    ipython = shell.get_ipython() if shell is not None else None
    return ipython is not None and "IPKernelApp" in getattr(ipython, "config", {})


class _DisplayedBar(tqdm):
    """A tqdm text bar shown as a Jupyter display that each refresh replaces (nothing is written to stderr)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._handle: Any = None
        kwargs.update(file=io.StringIO(), ncols=kwargs.get("ncols") or 100, dynamic_ncols=False)
        super().__init__(*args, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        from IPython.display import display

        text = {"text/plain": self.__str__() if msg is None else msg}
        if self._handle is None:
            self._handle = display(text, raw=True, display_id=True)
        else:
            self._handle.update(text, raw=True)
        return True


def progress_bar(iterable: Iterable[Any] | None = None, **kwargs: Any) -> tqdm:
    """``tqdm(iterable, **kwargs)``; in a Jupyter kernel a bar whose saved output is its final state."""
    bar = _DisplayedBar if in_notebook() and not kwargs.get("disable") else tqdm
    return bar(iterable, **kwargs)
