from rubric_engine.cli import main

main()
