from echo_sim.cli import main

raise SystemExit(main())
