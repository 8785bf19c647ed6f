// Package conf parses Skiff's configuration files. The format is a
// compatible subset of nats-server's, so that an existing nats-server
// configuration can be reused; docs/config-format.md is the full reference.
//
// # Basics
//
// A file is a map of entries; values are strings, numbers, sizes,
// booleans, arrays and maps, and may refer to earlier keys or to the
// environment:
//
//	port: 4222                      # ':' or '=' or just a space
//	host = 0.0.0.0
//	max_payload 1MB                 # 1048576: k,m,g = 1000^n; kb,mib = 1024^n
//	ping_interval: "2m"
//	authorization {
//	  users = [
//	    {user: alice, password: $ALICE_PASSWORD}
//	  ]
//	  timeout: 2                    # seconds
//	}
//	include "accounts.conf"         # ParseFile and ParseFS only
//
// Parse, ParseFile or ParseFS return a *Map, which keeps entries in file
// order; Get looks a key up without regard to case, and Keys, All and Walk
// list entries. Every scalar is a Value that keeps its text as written as
// well as what it decodes to, and the accessors Str, Int, Float, Bool,
// Size, Duration, Array and Map read it as what the caller needs, failing
// with ErrType when they cannot. (Str rather than String, which renders a
// Value in the file syntax for fmt.)
//
//	m, err := conf.ParseFile("skiff.conf")
//	if err != nil {
//		return err // conf: skiff.conf: line 7: expected a value, found '}'
//	}
//	if v, ok := m.Get("ping_interval"); ok {
//		d, err := v.Duration() // 2m0s
//		...
//	}
//	if v, ok := m.Get("max_payload"); ok {
//		n, err := v.Size() // 1048576
//		...
//	}
//
// A value such as 2m is both a size (2,000,000) and a duration (two
// minutes); the parser decodes it as the size and Value.Duration re-reads
// its text, so the option that reads it decides. Accessor errors name the
// file, line and key path: "conf: line 9: authorization.timeout: cannot
// read string "soon" as a duration".
//
// Map.String writes a map back in a canonical form that parses to the
// same entries: the effective configuration, with includes and variables
// expanded.
//
// # Grammar
//
//	file    = [BOM] ( body | "{" body "}" )
//	body    = { entry ( NEWLINE | "," | ";" ) }       last separator optional
//	entry   = key [ ":" | "=" ] value
//	        | "include" ( quoted | word )             file's entries go here
//	key     = quoted | bare key                       kept as written
//	value   = quoted | word | array | map
//	array   = "[" [ value { ( "," | NEWLINE ) value } [ "," ] ] "]"
//	map     = "{" body "}"
//	quoted  = '"' { char | escape } '"' | "'" { char } "'"
//	word    = bytes up to space, tab, new line, "," ";" "}" "]"
//	comment = ( "#" | "//" ) to the end of the line, where a token may start
//
// A word is, in order: $NAME (a variable; $ then a digit is a bcrypt hash,
// kept as a string), true/false/yes/no/on/off, an integer
// ([+-]digits, "_" between digits), a float (digits "." digits with an
// optional exponent), a size (integer and unit), else a string.
//
// # Caveats
//
// Parse has no file system and rejects include with ErrInclude. The
// limits MaxInputSize, MaxDepth, MaxIncludeDepth and MaxExpansion bound
// what one call reads. A few nats-server forms are not supported: the
// parenthesised block string, dates (kept as strings), and escapes in
// unquoted words (kept as written, which suits Windows paths).
//
// # Concurrency
//
// Parsing reads the environment and, for ParseFile and ParseFS, files; a
// returned Map and its Values are immutable and safe for concurrent use.
package conf
