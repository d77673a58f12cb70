"""``python -m interop --namesrv HOST:PORT [--clients java,java5,go,cpp,node,python] [--no-containers]``."""

import sys

from interop.runner import main

sys.exit(main())
