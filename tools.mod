// Developer tools, pinned with go's tool directive in their own module file so
// their dependencies stay out of go.mod: staticcheck needs golang.org/x/exp/typeparams,
// which in go.mod's graph (goose pulls a 2026 golang.org/x/exp whose zip the module
// proxy refuses) cannot be resolved. Run: go tool -modfile=tools.mod staticcheck ./...
// Update: go get -tool -modfile=tools.mod honnef.co/go/tools/cmd/staticcheck@VERSION
module github.com/seckill-go/seckill-go

go 1.26.8

tool honnef.co/go/tools/cmd/staticcheck

require (
	github.com/BurntSushi/toml v1.4.1-0.20240526193622-a339e1f7089c // indirect
	golang.org/x/exp/typeparams v0.0.0-20231108232855-2478ac86f678 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
	honnef.co/go/tools v0.8.2 // indirect
)
