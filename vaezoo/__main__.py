import sys

from vaezoo.cli import main

sys.exit(main())
