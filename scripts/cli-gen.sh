#!/usr/bin/env bash
# cli-gen.sh - the man pages and the shell completions of `stepprof`, generated at
# build time from the --help texts of the built command, so that they never say
# something the command does not (make builds them into build/share/).
#
#   scripts/cli-gen.sh man BIN [VERB] [DOCDIR]  roff page stepprof(1), or stepprof-VERB(1)
#   scripts/cli-gen.sh bash BIN                 bash completion (complete -F _stepprof)
#   scripts/cli-gen.sh zsh BIN                  zsh completion (#compdef stepprof)
#
# What is read from the help texts:
#   - the verbs and their one-line summaries: the "verbs:" block of `stepprof --help`;
#   - each verb's synopsis: the "usage: stepprof VERB ..." line of `stepprof VERB
#     --help` and its continuation lines (indented under the first item); its
#     options are the words of the synopsis that start with '-' ("[--bpf|--no-bpf]"
#     gives two, "--watch[=OPTIONS]" gives --watch), an option followed by an
#     upper-case word takes a value (DIR: a directory, FILE: a file, other: no
#     completion);
#   - stepprof(1) also has the STEPPROF_* variables (scripts/config-table.sh);
#   - the rest of each text is the page's description: paragraphs flush left are
#     filled, indented blocks (option lists, tables) kept line for line, an
#     "Exit status:" paragraph is the EXIT STATUS section.
#
# DOCDIR (man only) is where the installed documentation lives, named in SEE ALSO.
set -eu

mode=${1:?usage: cli-gen.sh man|bash|zsh BIN [VERB] [DOCDIR]}
bin=${2:?usage: cli-gen.sh man|bash|zsh BIN [VERB] [DOCDIR]}

# The command's own help, never recorded by a preload the caller may have set.
help() { LD_PRELOAD= "$bin" "$@"; }

overview=$(help --help)
version=$(help --version | awk '{ print $2; exit }')

# "verb<TAB>summary" per verb, in the order of `stepprof --help`.
verbs_table() {
	printf '%s\n' "$overview" | awk '
		/^verbs:$/ { on = 1; next }
		on && /^$/ { exit }
		on { sub(/^ +/, ""); v = $1; sub(/^[^ ]+ +/, ""); print v "\t" $0 }'
}
verbs=$(verbs_table | cut -f1)
[ -n "$verbs" ] || { echo "cli-gen.sh: no \"verbs:\" block in \`$bin --help\`" >&2; exit 1; }

# The synopsis of a verb: its usage line and continuations, without "usage: ", on one line.
synopsis() {
	help "$1" --help | awk -v v="$1" '
		NR == 1 && $0 !~ "^usage: stepprof " v "( |$)" {
			print "cli-gen.sh: `stepprof " v " --help` does not start with \"usage: stepprof " v "\"" > "/dev/stderr"
			bad = 1
			exit 1
		}
		NR == 1 { sub(/^usage: stepprof [^ ]+ ?/, ""); s = $0; next }
		/^          +[^ ]/ { sub(/^ +/, ""); s = s " " $0; next }
		{ exit }
		END { if (!bad) print s }'
}

# The options of a synopsis, one per line: "NAME VALUE" (VALUE empty when none).
# An item is what stands between spaces outside brackets; a value is the upper-case
# word after an option within its item ("[-o DIR]"), never an operand.
options() {
	printf '%s\n' "$1" | awk '
		function item(t,   n, w, i) {
			sub(/[.]+$/, "", t)
			if (t ~ /^\[.*\]$/)
				t = substr(t, 2, length(t) - 2)
			n = split(t, w, /[ |]/)
			for (i = 1; i <= n; i++) {
				x = w[i]
				sub(/^\[+/, "", x) # an option nested in an item: "[--json [--schema N]|--csv]"
				if (x !~ /^-/ || x == "--")
					continue
				sub(/[[=].*/, "", x)
				v = i < n ? w[i + 1] : ""
				sub(/\]+$/, "", v)
				print x " " (v ~ /^[A-Z][A-Z_:=]*$/ ? v : "")
			}
		}
		{
			d = 0; t = ""
			for (c = 1; c <= length($0); c++) {
				ch = substr($0, c, 1)
				if (ch == " " && !d) { item(t); t = ""; continue }
				d += (ch == "[") - (ch == "]")
				t = t ch
			}
			item(t)
			print "--help "
		}' | awk '!seen[$1]++'
}

# ------------------------------------------------------------------ man

# Text to roff: backslashes shown as such, '-' as the minus that copies and
# searches as '-', a line never read as a request.
roff_escape() {
	sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
}

# The body of a help text (after its usage lines) as man sections.
roff_body() {
	awk '
		function flush(   i, flat) {
			if (!n)
				return
			flat = 1
			for (i = 1; i <= n; i++)
				if (L[i] ~ /^ /)
					flat = 0
			if (L[1] ~ /^[Ee]xit status: /) {
				print ".SH \"EXIT STATUS\""
				sub(/^[Ee]xit status: /, "", L[1])
			} else if (L[1] == "verbs:") {
				print ".SH VERBS"
				for (i = 2; i <= n; i++) {
					split(L[i], w, " ")
					t = L[i]; sub(/^ *[^ ]+ +/, "", t)
					print ".TP\n\\fB" w[1] "\\fR\n" t " (\\fBstepprof\\-" w[1] "\\fR(1))"
				}
				n = 0
				return
			} else {
				print ".PP"
			}
			if (!flat)
				print ".nf"
			for (i = 1; i <= n; i++)
				print L[i]
			if (!flat)
				print ".fi"
			n = 0
		}
		/^$/ { flush(); next }
		{ L[++n] = $0 }
		END { flush() }'
}

# The STEPPROF_* variables (the README's table, scripts/config-table.sh, from
# preload/config.def) as the ENVIRONMENT section of stepprof(1).
environment() {
	printf '.SH ENVIRONMENT\n.PP\n'
	printf 'Read by libstepprof.so in the profiled job, by \\fBstepprof run\\fR and by the eBPF collector.\n'
	"$(dirname "$0")/config-table.sh" | awk 'NR > 2 {
		sub(/^\| /, ""); sub(/ \|$/, ""); split($0, c, / \| /)
		gsub(/`/, "", c[1]); gsub(/`/, "", c[2]); gsub(/\\\|/, "|", c[3])
		print c[1] "\t" (c[2] == "(unset)" ? "unset" : c[2]) "\t" c[3] }' | roff_escape |
		awk -F '\t' '{ print ".TP\n\\fB" $1 "\\fR (default: " $2 ")\n" $3 }'
}

man_page() {
	local verb=${1:-} docdir=${2:-/usr/local/share/doc/stepprof} text name summary title see v
	if [ -z "$verb" ]; then
		text=$(help --help)
		name=stepprof
		summary=$(printf '%s\n' "$text" | awk '/^$/ { p = 1; next } p { sub(/:.*/, ""); print; exit }')
		title=STEPPROF
	else
		printf '%s\n' "$verbs" | grep -qx -- "$verb" || { echo "cli-gen.sh: $verb: not a verb of $bin" >&2; exit 1; }
		text=$(help "$verb" --help)
		name=stepprof-$verb
		summary=$(verbs_table | awk -F '\t' -v v="$verb" '$1 == v { print $2 }')
		title=STEPPROF-$(printf '%s' "$verb" | tr a-z A-Z)
	fi
	printf '.\\" %s.1 - generated by scripts/cli-gen.sh from `stepprof%s --help`; do not edit.\n' \
		"$name" "${verb:+ $verb}"
	printf '.TH %s 1 "" "stepprof %s" "stepprof manual"\n.nh\n' "$title" "$version"
	printf '.SH NAME\n%s \\- %s\n' "$name" "$(printf '%s' "$summary" | roff_escape)"
	printf '.SH SYNOPSIS\n.nf\n'
	# the usage lines, "usage: " dropped and its continuations kept under the first item
	printf '%s\n' "$text" | awk '
		NR == 1 { sub(/^usage: /, ""); print; next }
		/^       [^ ]/ || /^          +[^ ]/ { sub(/^       /, ""); print; next }
		{ exit }' | roff_escape
	printf '.fi\n.SH DESCRIPTION\n'
	printf '%s\n' "$text" | awk '
		NR == 1 { next }
		!body && (/^       [^ ]/ || /^          +[^ ]/) { next }
		!body && /^$/ { next }
		{ body = 1; print }' | roff_escape | roff_body
	[ -z "$verb" ] && environment
	printf '.SH "SEE ALSO"\n'
	see=
	[ -n "$verb" ] && see="\\fBstepprof\\fR(1)"
	for v in $verbs; do
		[ "$v" = "$verb" ] && continue
		see="$see${see:+, }\\fBstepprof\\-$v\\fR(1)"
	done
	printf '%s\n.PP\nThe documentation: %s (README.md, docs/cli.md).\n' "$see" "$(printf '%s' "$docdir" | roff_escape)"
}

# ------------------------------------------------------------------ bash

bash_completion() {
	local v syn
	cat <<'EOF'
# bash completion for stepprof - generated by scripts/cli-gen.sh from the
# command's --help texts; do not edit.

_stepprof()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev= verb=${COMP_WORDS[1]} opts= i
	[ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
	COMPREPLY=()
	if [ "$COMP_CWORD" -eq 1 ]; then
EOF
	printf '\t\tCOMPREPLY=($(compgen -W "%s help --help --version" -- "$cur"))\n' "$(echo $verbs)"
	cat <<'EOF'
		return 0
	fi
	case $verb in
EOF
	printf '\thelp) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "%s" -- "$cur")); return 0 ;;\n' "$(echo $verbs)"
	for v in $verbs; do
		syn=$(synopsis "$v")
		printf '\t%s)\n\t\topts="%s"\n' "$v" "$(options "$syn" | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//')"
		# the value of an option: a directory, a file, or nothing to complete
		options "$syn" | awk '$2 != "" {
			act = $2 == "DIR" ? "COMPREPLY=($(compgen -d -- \"$cur\"))" : \
			      $2 == "FILE" ? "COMPREPLY=($(compgen -f -- \"$cur\"))" : ":"
			printf "\t\t[ \"$prev\" = \"%s\" ] && { %s; return 0; }\n", $1, act }'
		printf '\t\t;;\n'
	done
	cat <<'EOF'
	*) return 0 ;;
	esac
	# run: from the command on, what the command's own completion would give
	if [ "$verb" = run ]; then
		for ((i = 2; i < COMP_CWORD; i++)); do
			case ${COMP_WORDS[i]} in
			--) break ;;
			-o) ((i++)) ;;
			-*) ;;
			*) break ;;
			esac
		done
		if [ "$i" -lt "$COMP_CWORD" ]; then
			if [ $((i + 1)) -eq "$COMP_CWORD" ] && [ "${COMP_WORDS[i]}" = -- ]; then
				COMPREPLY=($(compgen -c -- "$cur" | sort -u))
			else
				COMPREPLY=($(compgen -f -- "$cur"))
			fi
			return 0
		fi
	fi
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	elif [ "$verb" = run ]; then
		COMPREPLY=($(compgen -c -- "$cur" | sort -u))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
	return 0
}
complete -o filenames -F _stepprof stepprof
EOF
}

# ------------------------------------------------------------------ zsh

zsh_completion() {
	local v syn
	printf '#compdef stepprof\n'
	printf '# zsh completion for stepprof - generated by scripts/cli-gen.sh from the\n'
	printf "# command's --help texts; do not edit.\n\n"
	printf '_stepprof() {\n\tlocal -a verbs opts\n\tverbs=(\n'
	verbs_table | while IFS=$'\t' read -r v s; do
		s=${s//\'/\'\\\'\'}
		printf "\t\t'%s:%s'\n" "$v" "${s//:/\\:}"
	done
	printf "\t\t'help:the --help of a verb'\n\t)\n"
	printf '\tif (( CURRENT == 2 )); then\n\t\t_describe -t verbs "stepprof verb" verbs\n\t\treturn\n\tfi\n'
	printf '\tcase $words[2] in\n'
	printf '\thelp) (( CURRENT == 3 )) && _describe -t verbs "stepprof verb" verbs; return ;;\n'
	for v in $verbs; do
		syn=$(synopsis "$v")
		printf '\t%s)\n\t\topts=(%s)\n' "$v" "$(options "$syn" | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//')"
		options "$syn" | awk '$2 != "" {
			act = $2 == "DIR" ? "_files -/" : $2 == "FILE" ? "_files" : "_message \"" $2 "\""
			printf "\t\t[[ $words[CURRENT-1] == %s ]] && { %s; return; }\n", $1, act }'
		printf '\t\t;;\n'
	done
	cat <<'EOF'
	*) return ;;
	esac
	# run: after "--", the command's own completion
	local n=${words[(I)--]}
	if [[ $words[2] == run ]] && (( n > 2 && n < CURRENT )); then
		shift n words
		(( CURRENT -= n ))
		_normal
		return
	fi
	if [[ $PREFIX == -* ]]; then
		compadd -a opts
	elif [[ $words[2] == run ]]; then
		_command_names -e
	else
		_files
	fi
}

_stepprof "$@"
EOF
}

case $mode in
man) man_page "${3:-}" "${4:-}" ;;
bash) bash_completion ;;
zsh) zsh_completion ;;
*) echo "cli-gen.sh: $mode: expected man, bash or zsh" >&2; exit 1 ;;
esac
