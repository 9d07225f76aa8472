/*
 * cuda_symtab.c - a function's name from its module's .symtab (see
 * cuda_symtab.h): the module's file found through the loader's link map,
 * mapped read-only, its section headers and symbol table checked against the
 * file's size, the STT_FUNC symbol that holds the address copied out.
 *
 * Raw syscalls: the input wrappers never see the open, and the descriptor is
 * closed as soon as the file is mapped (O_CLOEXEC meanwhile); nothing is read
 * or written through it.
 */
#include "cuda_symtab.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int lookup(const unsigned char *img, size_t size, uintptr_t addr, char *buf, size_t len)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
	    (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
		return -1;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum)
			continue;
		const Elf64_Shdr *st = &sh[sh[i].sh_link];
		if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset || st->sh_offset > size ||
		    st->sh_size > size - st->sh_offset || !st->sh_size)
			return -1;
		const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
		size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
		const char *str = (const char *)img + st->sh_offset;
		for (size_t k = 0; k < n; k++) {
			if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || sym[k].st_shndx == SHN_UNDEF ||
			    addr < sym[k].st_value || addr - sym[k].st_value >= (sym[k].st_size ? sym[k].st_size : 1) ||
			    sym[k].st_name >= st->sh_size)
				continue;
			const char *name = str + sym[k].st_name;
			size_t l = strnlen(name, st->sh_size - sym[k].st_name);
			if (l >= len)
				l = len - 1;
			memcpy(buf, name, l);
			buf[l] = 0;
			return 0;
		}
	}
	return -1;
}

int sp_symtab_name(const void *pc, char *buf, size_t len)
{
	Dl_info di;
	struct link_map *lm = NULL;
	if (!len || !dladdr1(pc, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return -1;
	/* the program itself has an empty name in the link map */
	const char *path = lm->l_name && lm->l_name[0] ? lm->l_name : "/proc/self/exe";
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct stat st;
	void *img = MAP_FAILED;
	if (syscall(SYS_fstat, (int)fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		img = (void *)syscall(SYS_mmap, NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, (int)fd, 0);
	syscall(SYS_close, (int)fd);
	if (img == MAP_FAILED)
		return -1;
	int rc = lookup(img, (size_t)st.st_size, (uintptr_t)pc - lm->l_addr, buf, len);
	syscall(SYS_munmap, img, (size_t)st.st_size);
	return rc;
}
