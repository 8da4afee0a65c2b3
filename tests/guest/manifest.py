# SPDX-License-Identifier: Apache-2.0
"""scripts/runtimes.txt, as the guest tests read it: what the image must hold."""

import os

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "runtimes.txt")


def rows():
    """(language, Debian package, distribution or None, import or None) per line."""
    out = []
    with open(PATH) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if words:
                assert len(words) in (2, 4), line
                out.append(tuple(words) + (None, None) if len(words) == 2 else tuple(words))
    return out
