"""``python -m interop --namesrv HOST:PORT [--clients cpp,node,python,java]``."""

import sys

from interop.runner import main

sys.exit(main())
