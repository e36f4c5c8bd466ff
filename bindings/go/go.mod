module weft

go 1.19
