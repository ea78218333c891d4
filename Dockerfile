# The production image: a static lectern binary on a distroless base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/lectern ./cmd/lectern

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lectern /lectern
EXPOSE 8080
ENTRYPOINT ["/lectern"]
CMD ["serve"]
