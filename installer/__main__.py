import sys

from installer.cli import main

sys.exit(main())
