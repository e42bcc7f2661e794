"""``python -m crawler.service``: the service without the ``crawler`` command."""

import sys

from crawler.service_cli import main

sys.exit(main())
