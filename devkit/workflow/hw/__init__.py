"""The hardware stage, one module per concept.

* :mod:`~devkit.workflow.hw.host` - requirements (device, real SDK), the SDK loader, host context;
* :mod:`~devkit.workflow.hw.store` - the append-only results store and its record schema;
* :mod:`~devkit.workflow.hw.fake` - a fake SDK to test the glue without a device;
* :mod:`~devkit.workflow.hw.compare` - measured against predicted latency;
* :mod:`~devkit.workflow.hw.harness` - the promoted cases the generated ``hw_tests/`` run;
* :mod:`~devkit.workflow.hw.cases` - their case files (``hw_tests/cases/<kernel>.json``) and the strict loader;
* :mod:`~devkit.workflow.hw.suite` - their shared pytest test body and the conftest's hooks and fixtures;
* :mod:`~devkit.workflow.hw.predict` - store measurements and trace-based predictions for calibration.

The generated tests import the small public face :mod:`devkit.hw` instead of these modules.
"""
