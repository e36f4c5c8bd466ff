module weft/plugins/go_schedule

go 1.19
