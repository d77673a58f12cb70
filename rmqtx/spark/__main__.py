"""`python -m rmqtx.spark export|stats|lag --store DIR`."""
import sys

from .jobs import main

sys.exit(main())
