from installer.entry import run

run()
