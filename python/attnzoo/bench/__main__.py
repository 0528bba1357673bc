import sys

from .kernels import main

sys.exit(main())
