from tfgpu_install.entry import run

run()
