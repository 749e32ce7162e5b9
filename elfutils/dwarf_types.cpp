namespace gilspy::elf {}
