import sys

try:
    from devkit.cli import main
except KeyboardInterrupt:  # Ctrl-C while the kit is still being imported
    sys.stderr.write("devkit: interrupted\n")
    raise SystemExit(130) from None

raise SystemExit(main())
